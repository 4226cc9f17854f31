"""A tiny CA for the lab component tests: a CA, and certificates signed by it, written as PEM files.

The tests make their own certificates instead of using rke_py.pki so they test the components alone.
"""

import base64
import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)


class LabCA:
    """A self-signed CA in ``directory``; ``issue`` writes ``<name>.pem`` and ``<name>-key.pem``."""

    def __init__(self, directory: Path, name: str = "kube-ca") -> None:
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self.key, hashes.SHA256())
        )
        self.path = directory / f"{name}.pem"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self, name: str, cn: str, orgs: tuple[str, ...] = (), ips: tuple[str, ...] = ()
    ) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if ips:
            names = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips] + [x509.DNSName("localhost")]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path = self.directory / f"{name}.pem"
        key_path = self.directory / f"{name}-key.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
        return cert_path, key_path

    def kubeconfig(
        self, name: str, server: str, cn: str, orgs: tuple[str, ...] = (), embed: bool = False
    ) -> Path:
        """A kubeconfig in RKE's layout: certificate files by path, or embedded (``embed``) like the
        admin kubeconfig."""
        cert, key = self.issue(name, cn, orgs)
        path = self.directory / f"kubecfg-{name}.yaml"
        if embed:
            data = {p: base64.b64encode(p.read_bytes()).decode() for p in (self.path, cert, key)}
            path.write_text(
                "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n"
                f"    certificate-authority-data: {data[self.path]}\n"
                f'    server: "{server}"\n  name: "lab"\n'
                'contexts:\n- context:\n    cluster: "lab"\n    user: "kube-admin-lab"\n  name: "lab"\n'
                'current-context: "lab"\nusers:\n- name: "kube-admin-lab"\n  user:\n'
                f"    client-certificate-data: {data[cert]}\n    client-key-data: {data[key]}\n"
            )
            os.chmod(path, 0o600)
            return path
        path.write_text(
            "apiVersion: v1\n"
            "kind: Config\n"
            "clusters:\n"
            "- cluster:\n"
            "    api-version: v1\n"
            f"    certificate-authority: {self.path}\n"
            f'    server: "{server}"\n'
            '  name: "local"\n'
            "contexts:\n"
            "- context:\n"
            '    cluster: "local"\n'
            f'    user: "{name}-local"\n'
            '  name: "local"\n'
            'current-context: "local"\n'
            "users:\n"
            f'- name: "{name}-local"\n'
            "  user:\n"
            f"    client-certificate: {cert}\n"
            f"    client-key: {key}\n"
        )
        return path
