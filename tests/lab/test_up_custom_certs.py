"""`rke-py up --custom-certs`, as an RKE user with their own CA does it: `rke-py cert generate-csr`, the
requests signed by that CA (its key never given to rke-py), then `up`. A certificate that lacks what the
cluster needs is refused before any host is touched, naming its file."""

from __future__ import annotations

from pathlib import Path

import pytest

from rke_py.pki.certs import make_ca, make_signed
from tests.lab.e2e import containers_on, host_exec, kubectl, own_lab, rke_py, up
from tests.unit.test_custom_certs import sign_all

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    with own_lab(tmp_path_factory, "custom", 1) as made:
        made.certs = Path(made.cluster_yml).parent / "cluster_certs"
        made.ca = make_ca("kube-ca")
        yield made


def test_up_runs_the_cluster_on_certificates_the_users_ca_signed(lab):
    made = rke_py("cert", "generate-csr", "--config", str(lab.cluster_yml))
    assert made.code == 0, made.stderr
    assert str(lab.certs / "kube-apiserver-csr.pem") in made.stdout.splitlines()
    sign_all(lab.certs, lab.ca, make_ca("kube-apiserver-requestheader-ca"))
    run = up(lab, "--custom-certs")
    assert run.code == 0, run.stderr
    assert run.json()["ok"] is True, run.json()["verify"]
    given = (lab.certs / "kube-apiserver.pem").read_text()
    assert host_exec(lab, 0, "cat /etc/kubernetes/ssl/kube-apiserver.pem") == given
    assert "No such file" in host_exec(lab, 0, "ls /etc/kubernetes/ssl/kube-ca-key.pem 2>&1")
    assert " Ready " in kubectl(lab, "get", "nodes", "--no-headers")
    assert up(lab, "--no-verify").json()["changed"] == 0  # the state keeps them


def test_a_certificate_without_every_name_it_needs_is_refused_before_any_host_is_touched(lab):
    before = containers_on(lab, 0)
    narrow = make_signed("kube-apiserver", lab.ca, "kube-apiserver", server=True, dns=["kubernetes"])
    (lab.certs / "kube-apiserver.pem").write_text(narrow.cert_pem)
    (lab.certs / "kube-apiserver-key.pem").write_text(narrow.key_pem)
    run = up(lab, "--custom-certs")
    assert run.code == 2, run.stderr
    assert f"{lab.certs}/kube-apiserver.pem: its subjectAltName lacks " in run.stderr
    assert lab.hosts[0].address in run.stderr.split("lacks", 1)[1]
    assert containers_on(lab, 0) == before
