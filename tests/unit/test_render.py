"""What people read after `up` and `plan`: one row per container change, file writes summed per host."""

from rich.console import Console

from rke_py.cli.render import print_actions
from rke_py.config.schema import Node
from rke_py.deploy.actions import ReplaceContainer, SyncNode, WriteFile
from rke_py.deploy.up import UpResult
from rke_py.plan.model import ContainerSpec, FileSpec


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
