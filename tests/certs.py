"""Certificates made to end at a given time, for the tests of what rke-py does about expiry."""

from __future__ import annotations

import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from rke_py.pki.certs import CertKeyPair


def ending_at(pair: CertKeyPair, signer: CertKeyPair, until: dt.datetime) -> CertKeyPair:
    """`pair` signed again by `signer` with its own key, names and extensions, valid for the 30 days before
    `until` (a CA passes itself as `signer`). Certificates after the first (a chain) are kept."""
    cert = pair.x509
    builder = (
        x509.CertificateBuilder()
        .subject_name(cert.subject)
        .issuer_name(cert.issuer)
        .public_key(cert.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(until - dt.timedelta(days=30))
        .not_valid_after(until)
    )
    for extension in cert.extensions:
        builder = builder.add_extension(extension.value, extension.critical)
    pem = builder.sign(signer.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()
    return CertKeyPair(pair.name, pem + pair.cert_pem[len(pair.leaf_pem) :], pair.key_pem)
