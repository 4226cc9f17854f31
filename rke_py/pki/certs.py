"""Keys and X.509 certificates, made the way RKE makes them (`rke:pki/cert/cert.go`, `rke:pki/util.go`).

RSA 2048, SHA-256 signatures, CAs and leaves valid ten years, every leaf dated from its CA's NotBefore.
Keys are PKCS#1 ("RSA PRIVATE KEY") PEM like RKE writes them, so state files and key files stay
interchangeable with RKE's. A leaf's PEM carries the leaf followed by its CA, as RKE's bundle does.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property
from typing import cast

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPublicKeyTypes as IssuerKey
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from rke_py.errors import RkePyError

KEY_BITS = 2048
VALIDITY = dt.timedelta(days=365 * 10)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class CertificateError(RkePyError):
    """A certificate in the state is unusable (wrong signer, key mismatch, unreadable PEM)."""


@dataclass(frozen=True)
class CertKeyPair:
    """One entry of the certificate bundle: what RKE stores as `certificatePEM` and `keyPEM`."""

    name: str
    cert_pem: str
    key_pem: str = ""  # empty for certificates rke-py only distributes (an external etcd CA)

    @cached_property
    def chain(self) -> list[x509.Certificate]:
        try:
            return x509.load_pem_x509_certificates(self.cert_pem.encode())
        except ValueError as e:
            raise CertificateError(f"certificate {self.name}: unreadable PEM: {e}") from e

    @cached_property
    def x509(self) -> x509.Certificate:
        """The certificate itself (the first PEM block)."""
        return self.chain[0]

    @cached_property
    def key(self) -> rsa.RSAPrivateKey:
        """The private key, fully validated (it signs certificates)."""
        return self._load_key(validate=True)

    def _load_key(self, validate: bool) -> rsa.RSAPrivateKey:
        if not self.key_pem:
            raise CertificateError(f"certificate {self.name}: the state holds no private key for it")
        try:
            key = serialization.load_pem_private_key(
                self.key_pem.encode(), password=None, unsafe_skip_rsa_key_validation=not validate
            )
        except (ValueError, TypeError) as e:
            raise CertificateError(f"certificate {self.name}: unreadable private key: {e}") from e
        if not isinstance(key, rsa.RSAPrivateKey):
            raise CertificateError(f"certificate {self.name}: only RSA keys are supported")
        return key

    @property
    def leaf_pem(self) -> str:
        """The certificate without the CA appended (what a kubeconfig embeds)."""
        return self.x509.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def common_name(self) -> str:
        return _name_attr(self.x509, NameOID.COMMON_NAME)

    @property
    def organization(self) -> str:
        return _name_attr(self.x509, NameOID.ORGANIZATION_NAME)

    def sans(self) -> tuple[set[str], set[IPAddress]]:
        """(DNS names, IP addresses) of the subjectAltName extension; empty sets if it has none."""
        try:
            ext = self.x509.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return set(), set()
        ips = {ip for ip in ext.get_values_for_type(x509.IPAddress) if isinstance(ip, IPAddress)}
        return set(ext.get_values_for_type(x509.DNSName)), ips

    def covers(self, dns: set[str], ips: set[IPAddress]) -> bool:
        """True when the certificate already names every DNS name and IP asked for (more is fine)."""
        have_dns, have_ips = self.sans()
        return dns <= have_dns and ips <= have_ips

    def signed_by(self, ca: CertKeyPair) -> bool:
        try:
            self.x509.verify_directly_issued_by(ca.x509)
        except (ValueError, TypeError, InvalidSignature):
            return False
        return True

    def key_matches(self) -> bool:
        """The key belongs to the certificate. Skips RSA validation (35 ms a key): only moduli compared."""
        key = self._load_key(validate=False)
        spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        return key.public_key().public_bytes(*spki) == self.x509.public_key().public_bytes(*spki)


def _name_attr(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> str:
    attrs = cert.subject.get_attributes_for_oid(oid)
    return str(attrs[0].value) if attrs else ""


# Keys being made ahead by `keys_ahead`, for `new_key` to hand out in order.
_ahead: ContextVar[list[Future[rsa.RSAPrivateKey]] | None] = ContextVar("keys_ahead", default=None)


def _generate() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)


def new_key() -> rsa.RSAPrivateKey:
    """A new key: one `keys_ahead` made, while there are any, else made now."""
    ahead = _ahead.get()
    return ahead.pop(0).result() if ahead else _generate()


@contextmanager
def keys_ahead(count: int) -> Iterator[None]:
    """Make the next `count` keys `new_key` hands out on every core, while the caller signs with the first
    ones. A new cluster needs a dozen keys, most of its certificates' CPU; OpenSSL makes them without
    holding the GIL, so the cores share the wait. Keys not asked for are dropped."""
    workers = min(count, os.cpu_count() or 1)
    if workers < 2:
        yield
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="rke-py-keys") as pool:
        ahead = [pool.submit(_generate) for _ in range(count)]
        token = _ahead.set(ahead)
        try:
            yield
        finally:
            _ahead.reset(token)
            for left in ahead:
                left.cancel()


def key_to_pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _subject(common_name: str, organization: str = "") -> x509.Name:
    attrs = []
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _serial() -> int:
    return secrets.randbelow(2**63 - 1) + 1


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    """RKE's key usages: signing and key encipherment, plus certificate signing for a CA."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=True,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def make_ca(name: str, common_name: str | None = None) -> CertKeyPair:
    """A self-signed CA, valid ten years from now (RKE: `NewSelfSignedCACert`)."""
    key = new_key()
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    subject = _subject(common_name or name)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(_serial())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(
            _key_usage(ca=True),
            critical=True,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertKeyPair(name, _cert_pem(cert), key_to_pem(key))


def make_signed(
    name: str,
    ca: CertKeyPair,
    common_name: str,
    *,
    organization: str = "",
    server: bool = False,
    dns: list[str] | tuple[str, ...] = (),
    ips: list[IPAddress] | tuple[IPAddress, ...] = (),
    key: rsa.RSAPrivateKey | None = None,
) -> CertKeyPair:
    """A leaf signed by `ca` (RKE: `GenerateSignedCertAndKey`); pass `key` to keep an existing key."""
    key = key or new_key()
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    public = key.public_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(_subject(common_name, organization))
        .issuer_name(ca.x509.subject)
        .public_key(public)
        .serial_number(_serial())
        .not_valid_before(ca.x509.not_valid_before_utc)
        .not_valid_after(now + VALIDITY)
        .add_extension(
            _key_usage(ca=False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(cast(IssuerKey, ca.x509.public_key())),
            critical=False,
        )
    )
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    names += [x509.IPAddress(ip) for ip in ips]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    return CertKeyPair(name, _cert_pem(cert) + ca.leaf_pem, key_to_pem(key))
