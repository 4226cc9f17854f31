"""Custom certificates (`up --custom-certs`, RKE's cert directory layout): every certificate checked
before any host is touched, each problem naming its file; `cert generate-csr` writes what a CA signs."""

from __future__ import annotations

import datetime as dt
import textwrap
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from rke_py.config import load_text
from rke_py.deploy.desired import prepare
from rke_py.errors import ConfigError
from rke_py.pki import build_bundle
from rke_py.pki.certs import CertKeyPair, make_ca, make_signed
from rke_py.pki.custom import generate_csrs, read

CLUSTER = """\
nodes:
  - {address: 10.1.0.1, user: rke, role: [controlplane, etcd]}
  - {address: 10.1.0.2, user: rke, role: [worker]}
"""


@pytest.fixture
def config():
    return load_text(CLUSTER).config


def write(directory: Path, bundle) -> None:
    directory.mkdir(exist_ok=True)
    for name, pair in bundle.items():
        (directory / f"{name}.pem").write_text(pair.cert_pem)
        if pair.key_pem and name != "kube-ca":  # a CA's key may stay with whoever signs
            (directory / f"{name}-key.pem").write_text(pair.key_pem)


def problems(directory: Path, config) -> list[str]:
    with pytest.raises(ConfigError) as e:
        read(directory, config)
    return [str(p) for p in e.value.problems]


def test_a_complete_directory_is_the_bundle_as_given(tmp_path, config):
    bundle = build_bundle(config)
    write(tmp_path / "certs", bundle)
    got = read(tmp_path / "certs", config)
    assert set(got) == set(bundle)
    assert got["kube-apiserver"].cert_pem == bundle["kube-apiserver"].cert_pem
    assert got["kube-ca"].key_pem == ""


def test_every_problem_is_named_with_its_file(tmp_path, config):
    bundle = build_bundle(config)
    other = make_ca("kube-ca")
    d = tmp_path / "certs"
    bundle["kube-scheduler"] = make_signed("kube-scheduler", other, "system:kube-scheduler")
    bundle["kube-proxy"] = make_signed("kube-proxy", bundle["kube-ca"], "kube-proxy")
    bundle["kube-apiserver"] = make_signed(
        "kube-apiserver", bundle["kube-ca"], "kube-apiserver", server=True, dns=["kubernetes"]
    )
    write(d, bundle)
    (d / "kube-node.pem").unlink()
    (d / "kube-admin-key.pem").write_text(bundle["kube-proxy"].key_pem)
    found = problems(d, config)
    assert f"{d}/kube-node.pem: missing — run `rke-py cert generate-csr`" in found[0]
    assert f"{d}/kube-admin-key.pem: this key does not belong to kube-admin.pem" in found
    assert f"{d}/kube-scheduler.pem: it is not signed by kube-ca — sign it with kube-ca-key.pem" in found
    assert any(p.startswith(f"{d}/kube-proxy.pem: its subject must be CN=system:kube-proxy") for p in found)
    lacks = next(p for p in found if p.startswith(f"{d}/kube-apiserver.pem: its subjectAltName lacks"))
    assert "10.1.0.1" in lacks and "kubernetes.default" in lacks and "127.0.0.1" in lacks
    assert len(found) == 5, found


def test_an_expired_certificate_is_refused(tmp_path, config):
    bundle = build_bundle(config)
    bundle["kube-admin"] = expired(bundle["kube-admin"], bundle["kube-ca"])
    write(tmp_path / "certs", bundle)
    assert [p for p in problems(tmp_path / "certs", config) if "kube-admin.pem: it expired on" in p]


def expired(pair: CertKeyPair, ca: CertKeyPair) -> CertKeyPair:
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(pair.x509.subject)
        .issuer_name(ca.x509.subject)
        .public_key(pair.x509.public_key())
        .serial_number(7)
        .not_valid_before(now - dt.timedelta(days=30))
        .not_valid_after(now - dt.timedelta(days=1))
        .sign(ca.key, hashes.SHA256())
    )
    return CertKeyPair(pair.name, cert.public_bytes(serialization.Encoding.PEM).decode(), pair.key_pem)


def sign_all(directory: Path, ca: CertKeyPair, requestheader: CertKeyPair) -> None:
    """What a user's CA does with the requests: sign each as asked, server and client usage."""
    for csr_file in directory.glob("*-csr.pem"):
        csr = x509.load_pem_x509_csr(csr_file.read_bytes())
        name = csr_file.name.removesuffix("-csr.pem")
        signer = requestheader if name == "kube-apiserver-proxy-client" else ca
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(csr.subject)
            .issuer_name(signer.x509.subject)
            .public_key(csr.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + dt.timedelta(days=365))
        )
        for ext in csr.extensions:
            builder = builder.add_extension(ext.value, ext.critical)
        pem = builder.sign(signer.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
        (directory / f"{name}.pem").write_bytes(pem)
    (directory / "kube-ca.pem").write_text(ca.cert_pem)
    (directory / "kube-apiserver-requestheader-ca.pem").write_text(requestheader.cert_pem)


def test_generated_requests_signed_by_the_users_ca_make_a_valid_directory(tmp_path, config):
    d = tmp_path / "certs"
    written = generate_csrs(d, config)
    assert {p.name for p in written} >= {"kube-apiserver-csr.pem", "kube-etcd-10-1-0-1-csr.pem"}
    assert (d / "kube-node-key.pem").stat().st_mode & 0o777 == 0o600
    kept = (d / "kube-node-key.pem").read_text()
    generate_csrs(d, config)
    assert (d / "kube-node-key.pem").read_text() == kept  # a second run keeps the keys
    sign_all(d, make_ca("kube-ca"), make_ca("kube-apiserver-requestheader-ca"))
    bundle = read(d, config)
    assert bundle["kube-node"].organization == "system:nodes"


def test_up_with_custom_certs_keeps_them_in_the_state(tmp_path):
    path = tmp_path / "cluster.yml"
    path.write_text(textwrap.dedent(CLUSTER))
    d = tmp_path / "cluster_certs"
    generate_csrs(d, load_text(CLUSTER).config)
    sign_all(d, make_ca("kube-ca"), make_ca("kube-apiserver-requestheader-ca"))
    desired = prepare(path, custom_certs=d)
    assert desired.bundle["kube-apiserver"].cert_pem == (d / "kube-apiserver.pem").read_text()
    assert desired.bundle["kube-ca"].key_pem == ""
