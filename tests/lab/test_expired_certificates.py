"""A cluster whose certificates have expired, as RKE's users find theirs: every leaf certificate (same CA,
same keys) ends in the past, on the hosts, in the state and in the admin kubeconfig, and every component has
restarted with it, so nothing answers: etcd members refuse each other, the apiservers reach no etcd, the
kubelets no apiserver. `status` names the expired certificates and the command that renews them;
`rke-py cert rotate` brings the cluster back. Three nodes with every role, so etcd has a quorum to lose."""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from pathlib import Path

import pytest
from cryptography import x509
from ruamel.yaml import YAML

from rke_py.pki.bundle import CA, PROXY_CLIENT, REQUESTHEADER_CA
from rke_py.pki.certs import CertKeyPair
from rke_py.state import read_state, write_state
from tests.certs import ending_at
from tests.lab.e2e import (
    cluster_args,
    host_exec,
    kubectl,
    kubectl_run,
    own_lab,
    rke_py,
    up,
)

pytestmark = pytest.mark.lab

SSL = "/etc/kubernetes/ssl"
# an expired client certificate: refused in the TLS handshake (the stand-ins) or answered 401 (Kubernetes);
# in TLS 1.3 the server's refusal comes after the client finished its handshake, so kubectl may meet it as
# its first write failing
REFUSED = re.compile(r"expired|Unauthorized|write: broken pipe|connection reset by peer")


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    with own_lab(tmp_path_factory, "expired", 3) as made:
        built = up(made)
        assert built.code == 0, built.stderr
        yield made


def expire_everything(lab) -> dict[str, CertKeyPair]:
    """Every leaf certificate ends an hour ago, everywhere the cluster keeps it; the components restart."""
    path = Path(lab.cluster_yml).with_suffix(".rkestate")
    state = read_state(path)
    assert state is not None
    bundle = state.current.certificates
    until = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    old = {
        name: ending_at(pair, bundle[REQUESTHEADER_CA if name == PROXY_CLIENT else CA], until)
        for name, pair in bundle.items()
        if name not in (CA, REQUESTHEADER_CA)
    }
    state.current.certificates = state.desired.certificates = {**bundle, **old}
    write_state(path, state)
    for i in range(len(lab.hosts)):
        present = set(host_exec(lab, i, f"ls {SSL}").split())
        for name, pair in old.items():
            if f"{name}.pem" in present:
                encoded = base64.b64encode(pair.cert_pem.encode()).decode()
                host_exec(lab, i, f"echo {encoded} | base64 -d > {SSL}/{name}.pem")
        host_exec(lab, i, "docker restart -t 5 $(docker ps -q --filter label=io.rke-py.managed) >/dev/null")
    admin = kubeconfig(lab)
    doc = YAML(typ="safe").load(admin.read_text())
    leaf = old["kube-admin"].leaf_pem.encode()
    doc["users"][0]["user"]["client-certificate-data"] = base64.b64encode(leaf).decode()
    with admin.open("w") as f:
        YAML(typ="safe").dump(doc, f)
    return old


def kubeconfig(lab) -> Path:
    return Path(lab.cluster_yml).parent / f"kube_config_{Path(lab.cluster_yml).name}"


@pytest.mark.real_kubernetes
def test_a_pod_runs_before_the_certificates_expire(lab):
    image = f"{lab.registry}/{lab.images['rke-tools']}"
    script = ("--command", "--", "sh", "-c", "echo witness > /tmp/w && echo started && sleep 3600")
    kubectl(lab, "run", "witness", f"--image={image}", "--restart=Never", *script)
    kubectl(lab, "wait", "--for=condition=Ready", "pod/witness", "--timeout=50s")


def test_status_names_each_expired_certificate_and_the_command_that_renews_it(lab, tmp_path):
    lab.old_kubeconfig = tmp_path / "kube_config_expired.yml"
    lab.expired = expire_everything(lab)
    lab.old_kubeconfig.write_bytes(kubeconfig(lab).read_bytes())
    refused = kubectl_run(lab, "get", "nodes")
    assert refused.returncode != 0, refused.stdout
    run = rke_py("status", *cluster_args(lab, "--output", "json"))
    assert run.code == 6, run.stderr
    named = " ".join(c["detail"] for c in run.json()["checks"] if c["name"] == "certificate")
    for name in ("kube-apiserver", "kube-node", "kube-admin"):
        assert f"certificate {name} expired on" in named, named
    assert "run `rke-py cert rotate`" in named


def test_cert_rotate_brings_the_expired_cluster_back(lab):
    run = rke_py("cert", "rotate", *cluster_args(lab, "--output", "json"), timeout=900)
    assert run.code == 0, run.stderr
    assert run.json()["ok"] is True, run.json()["verify"]
    nodes = kubectl(lab, "get", "nodes", "--no-headers").splitlines()
    assert len(nodes) == 3 and all(" Ready " in line for line in nodes), nodes
    state = read_state(Path(lab.cluster_yml).with_suffix(".rkestate"))
    assert state is not None
    now = dt.datetime.now(dt.UTC)
    assert all(p.x509.not_valid_after_utc > now for p in state.current.certificates.values())
    for i in range(3):
        pem = host_exec(lab, i, f"cat {SSL}/kube-node.pem").encode()
        assert x509.load_pem_x509_certificate(pem).not_valid_after_utc > now
    refused = kubectl_run(lab, "--kubeconfig", str(lab.old_kubeconfig), "get", "nodes")
    assert refused.returncode != 0 and REFUSED.search(refused.stderr), refused.stderr


def test_status_finds_no_expired_certificate_and_every_component_answers(lab):
    """(The leases are verify's, which `cert rotate` passed: under load a controller-manager may hand its
    lease on at any time, which a single look by `status` would count against this test.)"""
    status = rke_py("status", *cluster_args(lab, "--output", "json"))
    failed = [c for c in status.json()["checks"] if not c["ok"] and c["name"] != "lease"]
    assert failed == [], failed
    assert up(lab, "--no-verify").json()["changed"] == 0


@pytest.mark.real_kubernetes
def test_the_pod_from_before_still_runs_and_its_logs_and_exec_work(lab):
    pod = json.loads(kubectl(lab, "get", "pod", "witness", "-o", "json"))
    assert pod["status"]["phase"] == "Running", pod["status"]
    assert kubectl(lab, "logs", "witness").strip() == "started"
    assert kubectl(lab, "exec", "witness", "--", "cat", "/tmp/w").strip() == "witness"
