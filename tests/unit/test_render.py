"""What people read after `up`, `plan` and `status`: one row per container change, file writes summed per
host; on large clusters alike rows counted, failures always named."""

from rich.console import Console

from rke_py.cli.render import print_actions, print_report
from rke_py.config.schema import Node
from rke_py.deploy.actions import Cordon, ReplaceContainer, SyncNode, Uncordon, WriteFile
from rke_py.deploy.up import UpResult
from rke_py.plan.model import ContainerSpec, FileSpec
from rke_py.verify.checks import Check, Report


def test_file_writes_are_one_row_per_host_and_container_changes_are_listed():
    files = [WriteFile(FileSpec(f"/etc/kubernetes/ssl/{i}.pem", b""), "missing") for i in range(30)]
    files.append(WriteFile(FileSpec("/etc/kubernetes/nginx-proxy/nginx.conf", b""), "content changed"))
    replace = ReplaceContainer(ContainerSpec("nginx-proxy", "nginx"), "worker", "spec changed")
    sync = SyncNode("w1", Node(address="10.0.0.5"), "label zone=b")
    result = UpResult({"10.0.0.5": [*files, replace]}, [sync], None)
    out = Console(width=200, record=True)
    print_actions(out, result, title="Changes")
    text = out.export_text()
    assert "31 files" in text and "30 missing, 1 content changed" in text
    assert "nginx-proxy" in text and "spec changed" in text
    assert "/etc/kubernetes/ssl/0.pem" not in text
    assert "node/w1" in text and "label zone=b" in text
    assert result.changed == 33


def test_on_a_large_cluster_the_same_change_on_many_hosts_is_one_row_that_counts_them():
    replace = ReplaceContainer(ContainerSpec("kubelet", "hyperkube"), "worker", "spec changed; batch 1 of 2")
    hosts = {f"10.0.1.{i}": [replace] for i in range(1, 61)}
    hosts["10.0.1.7"] = [ReplaceContainer(ContainerSpec("kubelet", "hyperkube"), "worker", "image changed")]
    out = Console(width=200, record=True)
    print_actions(out, UpResult(hosts, [], None), title="Changes")
    text = out.export_text()
    assert "59 hosts" in text and "spec changed; batch 1 of 2" in text
    assert "10.0.1.7" in text and "image changed" in text  # the one that differs keeps its host
    assert "10.0.1.8 " not in text


def test_on_a_large_cluster_the_same_action_on_many_nodes_is_one_row_that_counts_them():
    cordons = [Cordon(f"w{i}", "before its kubelet is replaced") for i in range(1, 61)]
    uncordons = [Uncordon(f"w{i}", "Ready again") for i in range(1, 61)]
    sync = SyncNode("w1", Node(address="10.0.0.5"), "label zone=b")
    out = Console(width=200, record=True)
    print_actions(out, UpResult({}, [*cordons, *uncordons, sync], None), title="Changes")
    text = out.export_text()
    assert "node/… (60)" in text and "before its kubelet is replaced" in text and "Ready again" in text
    assert "node/w1" in text and "label zone=b" in text  # alone of its kind: named
    assert "node/w2 " not in text
    assert len(text.splitlines()) < 15


def test_a_large_clusters_report_lists_what_failed_and_counts_what_passed():
    checks = [
        Check("kubelet", f"10.0.1.{i}", i != 7, "ok" if i != 7 else "connection refused")
        for i in range(1, 41)
    ]
    checks += [Check("kube-proxy", f"10.0.1.{i}", True, "ok") for i in range(1, 41)]
    out = Console(width=200, record=True)
    print_report(out, Report(checks))
    text = out.export_text()
    assert "10.0.1.7" in text and "FAIL" in text and "connection refused" in text
    assert "39 targets" in text and "40 targets" in text
    assert "10.0.1.8 " not in text
    assert "1 check(s) failed" in text


def test_a_small_clusters_report_lists_every_check():
    checks = [Check("kubelet", f"10.0.1.{i}", True, "ok") for i in range(1, 4)]
    out = Console(width=200, record=True)
    print_report(out, Report(checks))
    text = out.export_text()
    assert all(f"10.0.1.{i}" in text for i in range(1, 4)) and "targets" not in text
