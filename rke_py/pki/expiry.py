"""When the cluster's certificates expire: those in the state, and what each kubelet serves (by default a
certificate the kubelet signed itself, for one year: RKE's most reported expiry). `status` fails on an
expired one and says what renews it; `up` and `status` warn a month ahead."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509

from rke_py.pki.bundle import CA, EXTERNAL, REQUESTHEADER_CA
from rke_py.pki.certs import CertKeyPair

WARN_DAYS = 30
KUBELET_PORT = 10250
KUBELET_SERVING = "kubelet serving"
LOCAL = "cluster.rkestate"  # where a certificate of the state lives


@dataclass(frozen=True)
class Expiry:
    name: str
    where: str  # the state, or the host that serves it
    subject: str
    sans: tuple[str, ...]
    not_after: dt.datetime

    def days_left(self, now: dt.datetime) -> int:
        return (self.not_after - now) // dt.timedelta(days=1)

    def fix(self, generated: bool) -> str:
        """The command that renews it. `generated`: kubelets serve certificates from kube-ca."""
        if self.name == KUBELET_SERVING and not generated:
            return (
                "set services.kubelet.generate_serving_certificate: true and run `rke-py up` (kubelets then "
                "serve certificates from kube-ca)"
            )
        if self.name in (CA, REQUESTHEADER_CA):
            return "run `rke-py cert rotate --rotate-ca`"
        if self.name in EXTERNAL:
            return "renew it with the external etcd's CA and set services.etcd.cert/ca_cert"
        return "run `rke-py cert rotate`"

    def to_dict(self, now: dt.datetime) -> dict[str, object]:
        return {
            "name": self.name,
            "where": self.where,
            "subject": self.subject,
            "sans": list(self.sans),
            "not_after": self.not_after.isoformat(),
            "days_left": self.days_left(now),
        }


def of(name: str, where: str, cert: x509.Certificate) -> Expiry:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        ips = [str(ip) for ip in ext.get_values_for_type(x509.IPAddress)]
        sans: tuple[str, ...] = (*ext.get_values_for_type(x509.DNSName), *ips)
    except x509.ExtensionNotFound:
        sans = ()
    return Expiry(name, where, cert.subject.rfc4514_string(), sans, cert.not_valid_after_utc)


def of_bundle(bundle: Mapping[str, CertKeyPair]) -> list[Expiry]:
    return [of(name, LOCAL, pair.x509) for name, pair in sorted(bundle.items())]


def served_by_kubelet(host: str, der: bytes) -> Expiry:
    return of(KUBELET_SERVING, host, x509.load_der_x509_certificate(der))


def ending(expiries: list[Expiry], now: dt.datetime) -> tuple[list[Expiry], list[Expiry]]:
    """(expired, expiring within WARN_DAYS)."""
    expired = [e for e in expiries if e.not_after <= now]
    soon = [e for e in expiries if now < e.not_after <= now + dt.timedelta(days=WARN_DAYS)]
    return expired, soon


def warning(e: Expiry, now: dt.datetime, generated: bool) -> str:
    when = f"{e.not_after:%Y-%m-%d}"
    state = f"expired on {when}" if e.not_after <= now else f"expires on {when} ({e.days_left(now)} days)"
    place = "" if e.where == LOCAL else f" served by {e.where}"
    return f"certificate {e.name}{place} {state}: {e.fix(generated)}"
