"""Certificates the user brings (`up --custom-certs`), in RKE's cert directory layout: `<name>.pem` and
`<name>-key.pem` for every certificate the cluster needs, the CAs' keys optional. Every one is checked
before any host is touched, each problem naming its file; `cert generate-csr` writes the keys and
certificate requests to have them signed."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

from rke_py.config.schema import ClusterConfig
from rke_py.errors import ConfigError, Problem
from rke_py.files import write_private_file
from rke_py.pki.bundle import (
    CA,
    CLIENTS,
    ETCD_PREFIX,
    KUBE_APISERVER,
    KUBELET_PREFIX,
    PROXY_CLIENT,
    REQUESTHEADER_CA,
    Bundle,
    apiserver_sans,
    cert_name_for_host,
    etcd_cert_name,
    etcd_sans,
    host_sans,
)
from rke_py.pki.certs import CertificateError, CertKeyPair, IPAddress, key_to_pem, new_key

Names = tuple[list[str], list[IPAddress]]
GENERATE = "run `rke-py cert generate-csr` for its key and request, and have the request signed by kube-ca"


def wanted(config: ClusterConfig) -> dict[str, tuple[str, str, Names | None]]:
    """Every leaf the cluster needs: name -> (CN, O, the names it must carry, None for a client)."""
    leaves: dict[str, tuple[str, str, Names | None]] = {
        name: (cn, org, None) for name, (cn, org) in CLIENTS.items()
    }
    leaves[KUBE_APISERVER] = (KUBE_APISERVER, "", apiserver_sans(config))
    leaves[PROXY_CLIENT] = (PROXY_CLIENT, "", None)
    if not config.services.etcd.external_urls:
        for node in config.hosts("etcd"):
            leaves[etcd_cert_name(node)] = (ETCD_PREFIX, "", etcd_sans(config))
    if config.services.kubelet.generate_serving_certificate:
        for node in config.nodes:
            name = cert_name_for_host(node, KUBELET_PREFIX)
            leaves[name] = (name, "", host_sans(node))
    return leaves


def read(directory: Path, config: ClusterConfig) -> Bundle:
    """The certificates in `directory`, every one checked; ConfigError listing every problem."""
    problems: list[Problem] = []

    def problem(path: Path, message: str, hint: str = "") -> None:
        problems.append(Problem(str(path), 0, 0, message, hint))

    bundle: Bundle = {}
    for name in (CA, REQUESTHEADER_CA, *wanted(config)):
        pair = _load(directory, name, key_needed=name not in (CA, REQUESTHEADER_CA), problem=problem)
        if pair is not None:
            bundle[name] = pair
    now = dt.datetime.now(dt.UTC)
    for name, (common_name, organization, names) in wanted(config).items():
        pair = bundle.get(name)
        if pair is None:
            continue
        path = directory / f"{name}.pem"
        signer = bundle.get(REQUESTHEADER_CA if name == PROXY_CLIENT else CA)
        if signer is not None and not pair.signed_by(signer):
            problem(path, f"it is not signed by {signer.name}", f"sign it with {signer.name}-key.pem")
        if pair.x509.not_valid_after_utc <= now:
            problem(path, f"it expired on {pair.x509.not_valid_after_utc:%Y-%m-%d}", "issue it anew")
        if name in CLIENTS and (pair.common_name, pair.organization) != (common_name, organization):
            subject = f"CN={common_name}" + (f", O={organization}" if organization else "")
            problem(path, f"its subject must be {subject}: Kubernetes knows the component by it", GENERATE)
        if names is not None:
            dns, ips = names
            have_dns, have_ips = pair.sans()
            missing = [*(d for d in dns if d not in have_dns), *(str(i) for i in ips if i not in have_ips)]
            if missing:
                problem(path, f"its subjectAltName lacks {', '.join(missing)}", GENERATE)
    if problems:
        raise ConfigError(problems)
    return bundle


def _load(directory: Path, name: str, *, key_needed: bool, problem) -> CertKeyPair | None:
    cert_file, key_file = directory / f"{name}.pem", directory / f"{name}-key.pem"
    if not cert_file.is_file():
        problem(cert_file, "missing", GENERATE if key_needed else "put the CA certificate there")
        return None
    key = key_file.read_text() if key_file.is_file() else ""
    if not key and key_needed:
        problem(key_file, "missing: the key of " + cert_file.name)
        return None
    pair = CertKeyPair(name, cert_file.read_text(), key)
    try:
        pair.x509  # noqa: B018 - parsed now, so a bad file is named here
        if key and not pair.key_matches():
            problem(key_file, f"this key does not belong to {cert_file.name}")
            return None
    except CertificateError as e:
        problem(cert_file, str(e).removeprefix(f"certificate {name}: "))
        return None
    return pair


def generate_csrs(directory: Path, config: ClusterConfig) -> list[Path]:
    """A key (kept if there is one) and a certificate request for every leaf; the requests' paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (common_name, organization, names) in wanted(config).items():
        key_file = directory / f"{name}-key.pem"
        if key_file.is_file():
            key = CertKeyPair(name, "", key_file.read_text()).key
        else:
            key = new_key()
            write_private_file(key_file, key_to_pem(key))
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization:
            attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attrs))
        if names is not None:
            dns, ips = names
            alt = [*(x509.DNSName(d) for d in dns), *(x509.IPAddress(i) for i in ips)]
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        csr = builder.sign(key, hashes.SHA256())
        path = directory / f"{name}-csr.pem"
        path.write_bytes(csr.public_bytes(serialization.Encoding.PEM))
        written.append(path)
    return written
