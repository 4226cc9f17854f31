"""`rke-py up` on one lab host with every role: the smallest real cluster, end to end."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from ruamel.yaml import YAML

from tests.lab.e2e import (
    cluster_args,
    containers_on,
    edit_cluster_yml,
    host_exec,
    kubectl,
    own_lab,
    pause_image,
    rke_py,
    up,
)

pytestmark = pytest.mark.lab

COMPONENTS = {
    "etcd",
    "etcd-rolling-snapshots",  # recurring snapshots are on by default, as in RKE
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "service-sidekick",
    "kubelet",
    "kube-proxy",
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    with own_lab(tmp_path_factory, "single", 1) as made:
        yield made


def test_up_builds_a_cluster_that_verifies_and_kubectl_can_use(lab):
    run = up(lab)
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["ok"] is True
    assert {c["name"] for c in doc["verify"]["checks"] if c["ok"]} >= {
        "etcd",
        "kube-apiserver",
        "lease",
        "node",
    }
    assert {x["name"] for x in doc["verify"]["leases"]} == {"kube-controller-manager", "kube-scheduler"}
    assert set(containers_on(lab, 0)) == COMPONENTS
    # a user's first command, at once: the namespace's ServiceAccount is there (up waited for it)
    first = kubectl(lab, "run", "first", f"--image={pause_image(lab)}", "--restart=Never")
    assert first.strip() == "pod/first created", first
    kubectl(lab, "delete", "pod", "first", "--wait=false")
    node = lab.hosts[0].name
    assert f"{node}   Ready" in kubectl(lab, "get", "nodes")
    assert kubectl(lab, "get", "--raw", "/healthz").strip() == "ok"
    state = Path(lab.cluster_yml).with_suffix(".rkestate")
    assert state.stat().st_mode & 0o777 == 0o600
    assert "PRIVATE KEY" not in run.stderr and "PRIVATE KEY" not in run.stdout


def _token(key_pem: str, claims: dict) -> str:
    """A service-account token as the apiserver signs one (RS256 JWT)."""
    key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    body = b64(json.dumps({"alg": "RS256", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode())
    return body + "." + b64(key.sign(body.encode(), padding.PKCS1v15(), hashes.SHA256()))


def _api_status(lab, token: str) -> int:
    """What the apiserver answers a request bearing `token` (and no client certificate)."""
    kubeconfig = Path(lab.cluster_yml).parent / f"kube_config_{Path(lab.cluster_yml).name}"
    cluster = YAML(typ="safe").load(kubeconfig.read_text())["clusters"][0]["cluster"]
    context = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
    )
    request = urllib.request.Request(cluster["server"] + "/api", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.real_kubernetes
def test_tokens_are_signed_as_rke_as_rkes_apiservers_accept_them(lab):
    """`rke up` taking the cluster back accepts `rke` alone: a token signed otherwise would lock pods out."""
    issued = kubectl(lab, "create", "token", "default").strip().split(".")[1]
    assert json.loads(base64.urlsafe_b64decode(issued + "=" * (-len(issued) % 4)))["iss"] == "rke"
    state = json.loads(Path(lab.cluster_yml).with_suffix(".rkestate").read_text())
    key_pem = state["currentState"]["certificatesBundle"]["kube-service-account-token"]["keyPEM"]
    uid = kubectl(lab, "get", "serviceaccount", "default", "-o", "jsonpath={.metadata.uid}")
    now = int(time.time())
    claims = {
        "iss": "rke",
        "sub": "system:serviceaccount:default:default",
        "aud": ["unknown"],
        "iat": now,
        "nbf": now,
        "exp": now + 600,
        "kubernetes.io": {"namespace": "default", "serviceaccount": {"name": "default", "uid": uid}},
    }
    assert _api_status(lab, _token(key_pem, claims)) == 200  # as RKE's cluster signed it
    assert _api_status(lab, _token(key_pem, claims | {"iss": "someone-else"})) == 401


def test_second_up_changes_nothing(lab):
    before = containers_on(lab, 0)
    run = up(lab)
    assert run.code == 0, run.stderr
    assert run.json()["changed"] == 0
    assert containers_on(lab, 0) == before


def test_live_plan_shows_what_up_would_change(lab):
    quiet = rke_py("plan", *cluster_args(lab, "--output", "json"))
    assert quiet.code == 0, quiet.stderr
    assert quiet.json()["changes"] == 0
    host_exec(lab, 0, "docker rm -f kube-proxy")
    run = rke_py("plan", *cluster_args(lab, "--output", "json"))
    assert run.json()["hosts"][0]["actions"] == [
        {"kind": "create", "phase": "worker", "target": "kube-proxy", "reason": "missing"}
    ]
    assert "kube-proxy" not in containers_on(lab, 0)  # plan changed nothing
    assert up(lab).code == 0


def test_a_component_that_fails_is_reported_with_its_log_and_the_old_one_is_put_back(lab):
    before = containers_on(lab, 0)
    edit_cluster_yml(
        lab, lambda d: d.setdefault("services", {}).__setitem__("kube-api", {"extra_args": {"bogus": "1"}})
    )
    try:
        run = up(lab)
        assert run.code == 5, run.stderr
        assert f"{lab.hosts[0].address}: kube-apiserver: health check failed" in run.stderr
        assert "unknown flag: --bogus" in run.stderr  # the container's own last log lines
        assert containers_on(lab, 0) == before  # the previous apiserver is back, under its name
        assert "true" in host_exec(lab, 0, "docker inspect -f '{{.State.Running}}' kube-apiserver")
    finally:
        edit_cluster_yml(lab, lambda d: d.pop("services"))
    assert up(lab).json()["changed"] == 0


def test_up_json_is_one_document_for_json_tool(lab):
    run = up(lab)
    done = subprocess.run(
        [sys.executable, "-m", "json.tool"], input=run.stdout, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert [h["address"] for h in json.loads(done.stdout)["hosts"]] == [lab.hosts[0].address]


def test_remove_leaves_the_host_as_it_was(lab):
    run = rke_py("remove", *cluster_args(lab, "--output", "json"))
    assert run.code == 2 and "--force" in run.stderr  # no terminal: refuses to prompt, names the flag
    run = rke_py("remove", *cluster_args(lab, "--force", "--output", "json"))
    assert run.code == 0, run.stderr
    assert containers_on(lab, 0) == {}
    assert host_exec(lab, 0, "ls /etc/kubernetes /var/lib/etcd 2>&1").count("No such file") == 2
    assert not Path(lab.cluster_yml).with_suffix(".rkestate").exists()


def test_a_port_taken_by_another_program_fails_preflight_and_changes_nothing(lab):
    host_exec(lab, 0, "busybox httpd -p 6443 -h /tmp")  # a daemon: it outlives this exec
    try:
        run = up(lab)
        assert run.code == 4, run.stderr
        assert "port 6443 (for kube-apiserver) is already in use by another program" in run.stderr
        assert containers_on(lab, 0) == {}
        assert "No such file" in host_exec(lab, 0, "ls /etc/kubernetes 2>&1")
    finally:
        host_exec(lab, 0, "pkill -f 'httpd -p 6443'")
