"""RKE's command line against a lab, as a pipeline that swapped `rke` for `rke-py` runs it: the SSH agent
for every host, a worker added with --update-only, the kubeconfig and the cluster's version back from
the state, and a restore with the local state file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rke_py.lab.state import Lab
from tests.lab.e2e import containers_on, edit_cluster_yml, kubectl, own_lab, rke_py

pytestmark = pytest.mark.lab

WORKER = 4  # the lab's fifth host: a worker the cluster gets later


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    with own_lab(tmp_path_factory, "rkecli", 5) as made:
        yield made


@pytest.fixture(scope="module")
def agent(lab: Lab, tmp_path_factory) -> Iterator[dict[str, str]]:
    """An ssh-agent holding the lab's key, as a CI runner's; cluster.yml then names no key file."""
    if shutil.which("ssh-agent") is None:
        pytest.skip("ssh-agent is not installed")
    sock = tmp_path_factory.mktemp("agent") / "agent.sock"
    started = subprocess.run(["ssh-agent", "-a", str(sock)], capture_output=True, text=True, check=True)
    pid = re.search(r"SSH_AGENT_PID=(\d+)", started.stdout)
    assert pid is not None, started.stdout
    env = {"SSH_AUTH_SOCK": str(sock)}
    subprocess.run(["ssh-add", str(lab.key_path)], env={**os.environ, **env}, check=True, capture_output=True)
    yield env
    os.kill(int(pid.group(1)), 15)


def rke(lab: Lab, *args: str, env: dict[str, str] | None = None):
    """rke-py with RKE's flags, --config from RKE_CONFIG as RKE reads it, and the lab's host keys."""
    known = ["--known-hosts", str(lab.known_hosts), "--host-key-policy", "strict"]
    return rke_py(*args, *known, env={"RKE_CONFIG": str(lab.cluster_yml), **(env or {})})


def kube_proxy_cert(state: Path) -> str:
    return json.loads(state.read_text())["currentState"]["certificatesBundle"]["kube-proxy"]["certificatePEM"]


def test_up_with_rkes_flags_reaches_every_host_through_the_agent(lab: Lab, agent: dict[str, str]):
    def without_keys_and_the_worker(data):
        data.pop("ssh_key_path", None)
        for node in data["nodes"]:
            node.pop("ssh_key_path", None)
        del data["nodes"][WORKER]

    edit_cluster_yml(lab, without_keys_and_the_worker)
    flags = ("--ssh-agent-auth", "--ignore-docker-version", "--disable-port-check")
    run = rke(lab, "up", *flags, env=agent)
    assert run.code == 0, run.stderr
    assert not containers_on(lab, WORKER)
    no_agent = rke(lab, "-q", "up", "--ssh-agent-auth", env={"SSH_AUTH_SOCK": ""})
    assert no_agent.code == 3 and "no agent running" in no_agent.stderr
    assert no_agent.stdout == ""


def test_update_only_deploys_the_new_worker_and_leaves_the_cluster_alone(lab: Lab, agent: dict[str, str]):
    before = [containers_on(lab, i) for i in range(WORKER)]
    host = lab.hosts[WORKER]

    def add_worker_and_change_the_kubelets(data):
        data["nodes"].append(
            {"address": host.address, "hostname_override": host.name, "user": lab.user, "role": ["worker"]}
        )
        data.setdefault("services", {})["kubelet"] = {"extra_args": {"v": "3"}}

    edit_cluster_yml(lab, add_worker_and_change_the_kubelets)
    run = rke(lab, "up", "--update-only", "--ssh-agent-auth", "--output", "json", env=agent)
    assert run.code == 0, run.stderr
    changed = {h["address"] for h in run.json()["hosts"] if h["actions"]}
    assert changed == {host.address}
    assert [containers_on(lab, i) for i in range(WORKER)] == before  # the kubelet change waits for `up`
    assert {"kubelet", "kube-proxy", "nginx-proxy"} <= set(containers_on(lab, WORKER))
    assert f"{host.name} " in kubectl(lab, "get", "nodes", "--no-headers")


def test_the_kubeconfig_and_the_version_come_back_from_the_state(lab: Lab, agent: dict[str, str]):
    kubeconfig = lab.dir / "kube_config_cluster.yml"
    kubeconfig.unlink()
    run = rke(lab, "util", "get-kubeconfig", env=agent)
    assert run.code == 0, run.stderr
    assert kubectl(lab, "get", "nodes", "--no-headers").count(" Ready ") == len(lab.hosts)
    # `rke version` takes --config alone (here from RKE_CONFIG); the agent answers for the key file
    version = rke_py("version", "--output", "json", env={"RKE_CONFIG": str(lab.cluster_yml), **agent})
    assert version.code == 0, version.stderr
    release = re.match(r"v\d+\.\d+\.\d+", lab.kubernetes_version)
    assert release is not None
    assert version.json()["cluster_kubernetes_version"].startswith(release.group(0))  # the stand-ins: -lab


def test_a_restore_with_the_local_state_keeps_what_changed_since_the_snapshot(
    lab: Lab, agent: dict[str, str]
):
    """RKE's --use-local-state: the certificates of cluster.rkestate, not those the snapshot holds."""
    saved = rke(lab, "etcd", "snapshot-save", "--name", "pipeline", "--ssh-agent-auth", env=agent)
    assert saved.code == 0, saved.stderr
    state = lab.dir / "cluster.rkestate"
    in_snapshot = kube_proxy_cert(state)
    rotated = rke(lab, "cert", "rotate", "--service", "kube-proxy", "--ssh-agent-auth", env=agent)
    assert rotated.code == 0, rotated.stderr
    local = kube_proxy_cert(state)
    assert local != in_snapshot
    kubectl(lab, "create", "configmap", "after-the-snapshot")
    restore = ("etcd", "snapshot-restore", "--name", "pipeline", "--force", "--ssh-agent-auth")
    run = rke(lab, *restore, "--use-local-state", env=agent)
    assert run.code == 0, run.stderr
    assert kube_proxy_cert(state) == local
    assert state.stat().st_mode & 0o777 == 0o600
    gone = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(lab.dir / "kube_config_cluster.yml"),
            "get",
            "configmap",
            "after-the-snapshot",
        ],
        capture_output=True,
        text=True,
    )
    assert gone.returncode != 0 and "NotFound" in gone.stderr
