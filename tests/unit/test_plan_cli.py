"""`rke-py plan --offline`: what a user sees, in text and JSON, with and without a state file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rke_py.cli import main
from rke_py.config import load
from rke_py.pki.bundle import build_bundle
from rke_py.plan import build_plan
from rke_py.state import ClusterState, State, state_path_for, write_state

FIXTURE = Path(__file__).parent.parent / "fixtures" / "plan" / "mixed-roles.yml"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


@pytest.fixture
def cluster_yml(tmp_path: Path) -> Path:
    target = tmp_path / "cluster.yml"
    shutil.copy(FIXTURE, target)
    return target


def test_json_plan_without_state_generates_certificates_and_says_so(
    cluster_yml: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["plan", "--offline", "--config", str(cluster_yml), "-o", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["certificates"] == "generated"
    assert "no state file" in err
    assert [n["address"] for n in doc["nodes"]] == ["10.0.0.1", "203.0.113.2", "10.0.0.3", "10.0.0.4"]
    worker = doc["nodes"][3]
    assert worker["roles"] == ["worker"]
    assert [c["name"] for c in worker["containers"]] == [
        "nginx-proxy",
        "service-sidekick",
        "kubelet",
        "kube-proxy",
    ]
    assert {c["plane"] for c in worker["containers"]} == {"worker"}
    assert all(len(c["spec_hash"]) == 32 for c in worker["containers"])
    assert {"path": "/etc/kubernetes/nginx-proxy/nginx.conf", "mode": "0644"}.items() <= worker["files"][
        -1
    ].items()
    assert "PRIVATE KEY" not in out and "BEGIN CERTIFICATE" not in out


def test_plan_uses_the_certificates_of_the_state_file(
    cluster_yml: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load(cluster_yml).config
    bundle = build_bundle(config)
    write_state(state_path_for(cluster_yml), ClusterState(current=State(certificates=bundle)))
    expected = {
        (n.address, c.name): c.spec_hash() for n in build_plan(config, bundle).nodes for c in n.containers
    }
    code, out, err = run(["plan", "--offline", "--config", str(cluster_yml), "--output", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["certificates"] == "state"
    assert "no state file" not in err
    shown = {(n["address"], c["name"]): c["spec_hash"] for n in doc["nodes"] for c in n["containers"]}
    assert shown == expected


def test_text_plan_lists_every_node_container_and_file_without_contents(
    cluster_yml: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["plan", "--offline", "--config", str(cluster_yml)], capsys)
    assert code == 0
    for address in ("10.0.0.1", "203.0.113.2", "10.0.0.3", "10.0.0.4"):
        assert address in out
    for name in (
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "nginx-proxy",
        "kubelet",
    ):
        assert name in out
    assert "/etc/kubernetes/admission.yaml" in out
    assert "PRIVATE KEY" not in out


def test_invalid_config_exits_with_the_config_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "cluster.yml"
    bad.write_text("nodes: []\n")
    code, out, err = run(["plan", "--offline", "--config", str(bad)], capsys)
    assert code == 2
    assert out == ""
    assert "cluster.yml" in err
