"""The conformance runner's pure parts, and the lab pieces it leans on: the add-on and test images the lab
serves and under which names, the cluster.yml that turns DNS on, the report a user reads at the end."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from rke_py.lab import addonimages, clusteryml, conformance, testimages
from rke_py.lab.state import Lab, LabError

JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="Kubernetes e2e suite">
  <testcase name="[SynchronizedBeforeSuite]"></testcase>
  <testcase name="[sig-network] DNS should provide DNS for the cluster  [Conformance]"></testcase>
  <testcase name="[sig-network] Services should serve a basic endpoint from pods  [Conformance]">
    <failure message="timed out">x</failure></testcase>
  <testcase name="[sig-apps] Daemon set [Serial] should run and stop simple daemon [Conformance]">
    <skipped message="skipped"></skipped></testcase>
  <testcase name="[sig-storage] CSI mock volume should do something"><skipped></skipped></testcase>
</testsuite></testsuites>
"""
SERIAL_JUNIT = """<testsuites><testsuite>
  <testcase name="[sig-apps] Daemon set [Serial] should run and stop simple daemon [Conformance]"></testcase>
</testsuite></testsuites>
"""


def test_a_report_counts_each_conformance_spec_once_by_the_pass_that_ran_it(tmp_path: Path):
    (tmp_path / "parallel.xml").write_text(JUNIT)
    (tmp_path / "serial.xml").write_text(SERIAL_JUNIT)
    passes = [
        conformance.read_junit(tmp_path / "parallel.xml"),
        conformance.read_junit(tmp_path / "serial.xml"),
    ]
    specs = conformance.merge(passes)
    assert {(s.sig, s.outcome) for s in specs} == {
        ("network", "passed"),
        ("network", "failed"),
        ("apps", "passed"),
    }
    text = conformance.table(specs, 125)
    assert text.splitlines()[-1] == "2 passed, 1 failed, 0 skipped"
    assert "failed: [sig-network] Services should serve a basic endpoint from pods  [Conformance]" in text
    assert "network" in text and "wall time: 2.1 min" in text


def test_a_spec_no_pass_ran_is_skipped():
    specs = conformance.merge([{"[sig-node] Pods x [Conformance]": "skipped"}, {}])
    assert [s.outcome for s in specs] == ["skipped"]


@pytest.mark.parametrize(
    ("name", "parallel", "serial"),
    [
        ("[sig-network] DNS should provide DNS for the cluster  [Conformance]", True, False),
        ("[sig-apps] Daemon set [Serial] should run and stop simple daemon [Conformance]", False, True),
        ("[sig-network] DNS should provide DNS for pods", False, False),
    ],
)
def test_the_passes_run_conformance_specs_and_the_serial_pass_only_serial_ones(name, parallel, serial):
    focus_parallel, focus_serial = conformance.focus_patterns("")
    skipped_in_parallel = re.search(conformance.SERIAL, name)  # the parallel pass's --skip
    assert bool(re.search(focus_parallel, name) and not skipped_in_parallel) == parallel
    assert bool(re.search(focus_serial, name)) == serial


def test_a_focus_narrows_both_passes_wherever_it_matches_in_the_name():
    parallel, serial = conformance.focus_patterns("Daemon set")
    assert re.search(serial, "[sig-apps] Daemon set [Serial] should run [Conformance]")
    assert re.search(serial, "[sig-apps] x [Serial] Daemon set should run [Conformance]")
    assert not re.search(parallel, "[sig-network] DNS should provide DNS [Conformance]")


def test_the_suite_starts_on_a_cluster_whose_controlplane_and_etcd_nodes_carry_rkes_taints():
    """Without --non-blocking-taints the suite waits forever for those nodes to become schedulable."""
    command = conformance.ginkgo_command(Path("/e2e"), Path("/k"), Path("/r"), "F", "S", 4)
    taints = "node-role.kubernetes.io/controlplane,node-role.kubernetes.io/etcd"
    assert f"--non-blocking-taints={taints}" in command
    assert command.index("--") < command.index("--kubeconfig=/k")


def test_a_missing_input_is_named_in_one_line_and_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for var in conformance.INPUTS:
        monkeypatch.delenv(var, raising=False)
    result = CliRunner().invoke(conformance.main, [])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "conformance: set RKE_PY_KUBE_BINARIES to a directory holding kube-apiserver,"
        " kube-controller-manager, kube-scheduler, kubelet, kube-proxy, cri-dockerd, kubectl"
    ]
    for var in conformance.INPUTS:
        monkeypatch.setenv(var, str(tmp_path))
    assert conformance.missing_input().startswith(
        f"conformance: RKE_PY_KUBE_BINARIES={tmp_path} lacks kube-apiserver"
    )


def test_an_existing_lab_must_serve_the_suite_and_hold_a_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """`--existing` runs on a lab as a user left it: one line and no traceback when it cannot."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for choices in conformance.INPUTS.values():
        for name in choices[0]:
            (inputs / name).touch()
    for var in conformance.INPUTS:
        monkeypatch.setenv(var, str(inputs))
    monkeypatch.setenv("RKE_PY_LAB_DIR", str(tmp_path / "lab"))
    run = ["--existing", "--name", "day2"]
    result = CliRunner().invoke(conformance.main, run)
    assert (result.exit_code, result.output.count("\n")) == (1, 1)
    assert "conformance: no lab at" in result.output
    lab = Lab(name="day2", dir=tmp_path / "lab", subnet="172.30.9.0/24", registry="172.30.9.2:5000")
    lab.dir.mkdir()
    lab.save()
    result = CliRunner().invoke(conformance.main, run)
    assert (
        result.output
        == "conformance: lab day2 does not serve the suite's images: it was made without --e2e\n"
    )
    lab.e2e_repo_list.touch()
    result = CliRunner().invoke(conformance.main, run)
    assert result.output == "conformance: lab day2 holds no cluster yet: run rke-py up on it first\n"
    assert result.exit_code == 1


def test_add_on_images_are_published_under_the_versions_default_names(tmp_path: Path):
    (tmp_path / "kube-dns").write_text("")
    (tmp_path / "node-cache").write_text("")
    assert sorted(addonimages.found(tmp_path)) == ["kube-dns", "node-cache"]
    assert addonimages.published_names("v1.28.14-rancher1-1", ("kubedns", "nodelocal")) == [
        "rancher/mirrored-k8s-dns-kube-dns:1.22.28",
        "rancher/mirrored-k8s-dns-node-cache:1.22.28",
    ]


def test_an_add_on_directory_without_any_known_binary_is_refused(tmp_path: Path):
    with pytest.raises(LabError, match="none of kube-dns, dnsmasq-nanny"):
        addonimages.found(tmp_path)


def test_the_suites_registries_all_point_into_the_lab_registry():
    text = testimages.repo_list("10.1.2.2:5000")
    lines = dict(line.split(": ") for line in text.splitlines())
    assert lines["promoterE2eRegistry"] == "10.1.2.2:5000/e2e-test-images"
    assert lines["invalidRegistry"] == "10.1.2.2:5000/invalid"
    assert all(value.startswith("10.1.2.2:5000/") for value in lines.values())


def test_the_lab_serves_the_suites_images_it_can_build_and_leaves_the_rest(tmp_path: Path):
    names = [
        "10.1.2.2:5000/e2e-test-images/agnhost:2.45",
        "10.1.2.2:5000/k8s/pause:3.9",
        "10.1.2.2:5000/e2e-test-images/sample-apiserver:1.17.7",
        "10.1.2.2:5000/e2e-test-images/volume/nfs:1.3",
        "registry.k8s.io/e2e-test-images/busybox:1.29-2",
    ]
    (tmp_path / "agnhost").write_text("")
    assert testimages.served(tmp_path, names, "10.1.2.2:5000") == {
        "e2e-test-images/agnhost:2.45": "e2e-test-images/agnhost",
        "k8s/pause:3.9": "k8s/pause",
    }  # sample-apiserver only when the directory has its binary


def _lab(addons: list[str]) -> Lab:
    images = dict.fromkeys(clusteryml.SYSTEM_IMAGES.values(), "rke-py-lab/x:1")
    return Lab(
        name="l", dir=Path("/x"), subnet="10.1.2.0/24", registry="10.1.2.2:5000", images=images, addons=addons
    )


def test_cluster_yml_keeps_rkes_dns_defaults_when_the_lab_serves_their_images():
    assert clusteryml.cluster_document(_lab([]))["dns"] == {"provider": "none"}
    kube_dns = ["kubedns", "dnsmasq", "kubedns_sidecar", "kubedns_autoscaler", "coredns_autoscaler"]
    assert clusteryml.cluster_document(_lab(kube_dns))["dns"] == {"provider": "kube-dns"}
    assert clusteryml.cluster_document(_lab([*kube_dns, "nodelocal", "coredns"]))["dns"] == {
        "provider": "coredns",
        "nodelocal": {"ip_address": "169.254.20.10"},
    }
    assert clusteryml.cluster_document(_lab(["coredns", "coredns_autoscaler"]))["dns"] == {
        "provider": "coredns"
    }


def test_flannel_and_metrics_server_are_published_under_kdm_names_and_turned_on(tmp_path: Path):
    """With flanneld and the flannel CNI plugin the cluster runs RKE's flannel instead of the lab's own pod
    network; with metrics-server, RKE's metrics-server add-on."""
    for name in ("flanneld", "flannel", "metrics-server"):
        (tmp_path / name).write_text("")
    assert sorted(addonimages.found(tmp_path)) == ["flannel", "flanneld", "metrics-server"]
    assert addonimages.published_names(
        "v1.28.7-rancher1-1", ("flannel", "flannel_cni", "metrics_server")
    ) == [
        "rancher/flannel-cni:v0.3.0-rancher9",
        "rancher/mirrored-flannel-flannel:v0.24.2",
        "rancher/mirrored-metrics-server:v0.7.0",
    ]
    document = clusteryml.cluster_document(_lab(["flannel", "flannel_cni", "metrics_server"]))
    assert (document["network"], document["monitoring"]) == (
        {"plugin": "flannel"},
        {"provider": "metrics-server"},
    )
    assert clusteryml.cluster_document(_lab(["flannel"]))["network"] == {"plugin": "none"}  # no CNI plugin


def test_a_build_kdm_never_listed_gets_its_minors_nearest_add_on_images_named_in_cluster_yml():
    """RKE shipped no v1.28.0, yet an upgrade from real v1.28.0 binaries keeps DNS: the lab serves the
    add-ons under v1.28.7's names and cluster.yml names them, as rke-py knows no images for v1.28.0."""
    assert addonimages.published_names("v1.28.0-rancher1-1", ("coredns",)) == [
        "rancher/mirrored-coredns-coredns:1.10.1"
    ]
    lab = _lab(["coredns", "coredns_autoscaler"])
    assert "coredns" not in clusteryml.cluster_document(lab)["system_images"]  # KDM lists v1.30.4
    lab.kubernetes_version = "v1.28.0-rancher1-1"
    named = clusteryml.cluster_document(lab)["system_images"]
    assert (named["coredns"], named["coredns_autoscaler"]) == (
        "rancher/mirrored-coredns-coredns:1.10.1",
        "rancher/mirrored-cluster-proportional-autoscaler:1.8.6",
    )
    with pytest.raises(LabError, match=r"v1\.19\.0-rancher1-1 has no default system images"):
        addonimages.published_names("v1.19.0-rancher1-1", ("coredns",))


def test_a_run_in_which_no_spec_ran_fails_with_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A --focus that matches nothing is not a pass: exit 1 and one line saying why."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for choices in conformance.INPUTS.values():
        for name in choices[0]:
            (inputs / name).touch()
    for var in conformance.INPUTS:
        monkeypatch.setenv(var, str(inputs))
    monkeypatch.setenv("RKE_PY_LAB_DIR", str(tmp_path / "lab"))
    lab = Lab(name="day2", dir=tmp_path / "lab", subnet="172.30.9.0/24", registry="172.30.9.2:5000")
    lab.dir.mkdir()
    lab.save()
    lab.e2e_repo_list.touch()
    (lab.dir / "kube_config_cluster.yml").touch()
    monkeypatch.setattr(conformance, "_suite", lambda *args: {})
    result = CliRunner().invoke(conformance.main, ["--existing", "--name", "day2", "--focus", "nothing"])
    assert result.exit_code == 1
    assert result.output.splitlines()[-2:] == [
        "0 passed, 0 failed, 0 skipped",
        "conformance: no spec ran; --focus 'nothing' matches no conformance spec?",
    ]


def test_cluster_dns_is_coredns_or_kube_dns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The suite needs a cluster DNS: CoreDNS, RKE's default, or kube-dns with its dnsmasq and sidecar."""
    for var, choices in conformance.INPUTS.items():
        directory = tmp_path / var
        directory.mkdir()
        for name in choices[-1]:
            (directory / name).touch()
        monkeypatch.setenv(var, str(directory))
    assert conformance.missing_input() == ""  # kube-dns's three
    addons = tmp_path / "RKE_PY_ADDON_BINARIES"
    for name in ("kube-dns", "sidecar"):
        (addons / name).unlink()
    assert conformance.missing_input() == (
        f"conformance: RKE_PY_ADDON_BINARIES={addons} lacks coredns (or kube-dns, dnsmasq-nanny, sidecar)"
    )
    (addons / "coredns").touch()
    assert conformance.missing_input() == ""
