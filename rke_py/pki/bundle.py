"""The cluster's certificate bundle: RKE's set of certificates, and the rule for keeping them.

Certificates live in `cluster.rkestate` and are never silently regenerated: everything already in the
state is kept, except that kube-apiserver and the etcd certificates get a new certificate (same key) when a
name they must carry is missing, and etcd or kubelet certificates of hosts that left the role are dropped.
A certificate that the current CA did not sign is an error: regenerating it would hide a broken state.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Callable, Iterable

from cryptography import x509

from rke_py.config.schema import ClusterConfig, Node
from rke_py.pki.certs import CertificateError, CertKeyPair, IPAddress, keys_ahead, make_ca, make_signed

Bundle = dict[str, CertKeyPair]

CA = "kube-ca"
REQUESTHEADER_CA = "kube-apiserver-requestheader-ca"
KUBE_APISERVER = "kube-apiserver"
SERVICE_ACCOUNT = "kube-service-account-token"
KUBE_CONTROLLER_MANAGER = "kube-controller-manager"
KUBE_SCHEDULER = "kube-scheduler"
KUBE_PROXY = "kube-proxy"
KUBE_NODE = "kube-node"
KUBE_ADMIN = "kube-admin"
PROXY_CLIENT = "kube-apiserver-proxy-client"
ETCD_PREFIX = "kube-etcd"
KUBELET_PREFIX = "kube-kubelet"
ETCD_CLIENT = "kube-etcd-client"  # external etcd only, from services.etcd.cert/key
ETCD_CLIENT_CA = "kube-etcd-client-ca"  # external etcd only, from services.etcd.ca_cert
EXTERNAL = (ETCD_CLIENT, ETCD_CLIENT_CA)

# Client certificates signed by kube-ca: name -> (CN, O). RKE: `rke:pki/services.go`.
CLIENTS: dict[str, tuple[str, str]] = {
    SERVICE_ACCOUNT: (SERVICE_ACCOUNT, ""),
    KUBE_CONTROLLER_MANAGER: ("system:kube-controller-manager", ""),
    KUBE_SCHEDULER: ("system:kube-scheduler", ""),
    KUBE_PROXY: ("system:kube-proxy", ""),
    KUBE_NODE: ("system:node", "system:nodes"),
    KUBE_ADMIN: (KUBE_ADMIN, "system:masters"),
}

KUBERNETES_DNS = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")


def cert_name_for_host(node: Node, prefix: str) -> str:
    """RKE's `GetCrtNameForHost`: `<prefix>-<internal address, or address>`, dots to dashes, lowercased."""
    address = node.address
    if node.internal_address and node.internal_address != node.address:
        address = node.internal_address
    return f"{prefix}-{address.replace('.', '-').lower()}"


def etcd_cert_name(node: Node) -> str:
    return cert_name_for_host(node, ETCD_PREFIX)


def has_kubeconfig(name: str) -> bool:
    """RKE (`ToCertObject`) makes a component kubeconfig for every certificate but these."""
    return (
        name not in (CA, KUBE_APISERVER, SERVICE_ACCOUNT)
        and ETCD_PREFIX not in name
        and KUBELET_PREFIX not in name
    )


def _ip(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def kubernetes_service_ips(service_cluster_ip_range: str) -> list[IPAddress]:
    """The first address of each service CIDR (`10.43.0.0/16` -> `10.43.0.1`), as RKE computes it."""
    ips = []
    for cidr in service_cluster_ip_range.split(","):
        try:
            network = ipaddress.ip_network(cidr.strip(), strict=False)
        except ValueError as e:
            raise CertificateError(f"service_cluster_ip_range {cidr.strip()!r} is not a CIDR: {e}") from e
        ips.append(network.network_address + 1)
    return ips


class _Names:
    """An ordered, duplicate-free (DNS, IP) collection: certificates list names in RKE's order."""

    def __init__(self) -> None:
        self.dns: list[str] = []
        self.ips: list[IPAddress] = []

    def add(self, text: str) -> None:
        ip = _ip(text)
        if ip is not None:
            if ip not in self.ips:
                self.ips.append(ip)
        elif text not in self.dns:
            self.dns.append(text)

    def add_host(self, node: Node) -> None:
        self.add(node.address)
        if node.internal_address and node.internal_address != node.address:
            self.add(node.internal_address)
        if node.hostname_override and node.hostname_override != node.address:
            self.add(node.hostname_override)

    def add_kubernetes(self, config: ClusterConfig) -> None:
        self.add("127.0.0.1")
        for ip in kubernetes_service_ips(config.services.kube_api.service_cluster_ip_range):
            self.add(str(ip))
        for name in KUBERNETES_DNS:
            self.add(name)
        self.add(f"kubernetes.default.svc.{config.services.kubelet.cluster_domain}")


def _alt_names(config: ClusterConfig, hosts: Iterable[Node], extra: Iterable[str] = ()) -> _Names:
    """RKE's `GetAltNames`: the hosts' addresses and names, `extra`, loopback and the kubernetes service."""
    names = _Names()
    for node in hosts:
        names.add_host(node)
    for san in extra:
        names.add(san)
    names.add_kubernetes(config)
    return names


def apiserver_sans(config: ClusterConfig) -> tuple[list[str], list[IPAddress]]:
    names = _alt_names(config, config.hosts("controlplane"), config.authentication.sans)
    return names.dns, names.ips


def etcd_sans(config: ClusterConfig) -> tuple[list[str], list[IPAddress]]:
    names = _alt_names(config, config.hosts("etcd"))
    return names.dns, names.ips


def host_sans(node: Node) -> tuple[list[str], list[IPAddress]]:
    names = _Names()
    names.add_host(node)
    return names.dns, names.ips


def _ensure_server(
    bundle: Bundle, name: str, ca: CertKeyPair, common_name: str, sans: tuple[list[str], list[IPAddress]]
) -> None:
    """Keep `bundle[name]` if it already names every SAN in `sans`; else re-sign it, keeping its key."""
    dns, ips = sans
    old = bundle.get(name)
    if old is not None and old.covers(set(dns), set(ips)):
        return
    key = old.key if old is not None else None
    bundle[name] = make_signed(name, ca, common_name, server=True, dns=dns, ips=ips, key=key)


def _drop_unused(bundle: Bundle, is_family: Callable[[str], bool], wanted: set[str]) -> None:
    for name in [n for n in bundle if is_family(n) and n not in wanted]:
        del bundle[name]


def _external_etcd(config: ClusterConfig) -> Bundle:
    etcd = config.services.etcd
    client = CertKeyPair(ETCD_CLIENT, etcd.cert, etcd.key)
    client_ca = CertKeyPair(ETCD_CLIENT_CA, etcd.ca_cert)
    _ = client_ca.x509  # parsed now: a bad PEM in cluster.yml fails before anything is deployed
    if not client.key_matches():
        raise CertificateError("services.etcd.key does not belong to services.etcd.cert")
    return {ETCD_CLIENT: client, ETCD_CLIENT_CA: client_ca}


def _check_ca(pair: CertKeyPair) -> None:
    try:
        is_ca = pair.x509.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca:
        raise CertificateError(f"{pair.name} in the state is not a CA certificate")
    if pair.key_pem and not pair.key_matches():  # custom certificates may come without the CA's key
        raise CertificateError(f"{pair.name} in the state: its private key does not belong to it")


def _check_kept(bundle: Bundle, previous: Bundle) -> None:
    """Every certificate carried over from the state must chain to the current CA and match its key."""
    for name, pair in bundle.items():
        if previous.get(name) is not pair or name in (CA, REQUESTHEADER_CA, *EXTERNAL):
            continue
        signer = bundle[REQUESTHEADER_CA] if name == PROXY_CLIENT else bundle[CA]
        if not pair.signed_by(signer):
            raise CertificateError(
                f"certificate {name} in the state is not signed by the current {signer.name}; "
                "the state is inconsistent (restore it from a backup, or rotate the CA)"
            )
        if pair.key_pem and not pair.key_matches():
            raise CertificateError(f"certificate {name} in the state: the private key does not belong to it")


def build_bundle(config: ClusterConfig, previous: Bundle | None = None) -> Bundle:
    """RKE's certificate set for `config`, reusing `previous` (the state's bundle) wherever it still fits."""
    previous = dict(previous or {})
    bundle: Bundle = dict(previous)
    etcd_hosts = [] if config.services.etcd.external_urls else config.hosts("etcd")
    kubelet_hosts = config.nodes if config.services.kubelet.generate_serving_certificate else []
    made = [CA, REQUESTHEADER_CA, KUBE_APISERVER, *CLIENTS, PROXY_CLIENT, *map(etcd_cert_name, etcd_hosts)]
    made += [cert_name_for_host(n, KUBELET_PREFIX) for n in kubelet_hosts]
    with keys_ahead(sum(name not in bundle for name in made)):  # each one missing takes a new key
        _fill(config, bundle, previous, etcd_hosts, kubelet_hosts)
    return bundle


def _fill(
    config: ClusterConfig, bundle: Bundle, previous: Bundle, etcd_hosts: list[Node], kubelet_hosts: list[Node]
) -> None:
    if CA in bundle:
        _check_ca(bundle[CA])
    elif bundle:
        raise CertificateError("the state holds certificates but no kube-ca; refusing to make a new CA")
    else:
        bundle[CA] = make_ca(CA)
    ca = bundle[CA]
    if REQUESTHEADER_CA in bundle:
        _check_ca(bundle[REQUESTHEADER_CA])
    else:  # clusters made before RKE added the aggregation layer CA
        bundle[REQUESTHEADER_CA] = make_ca(REQUESTHEADER_CA)
    _check_kept(bundle, previous)

    _ensure_server(bundle, KUBE_APISERVER, ca, KUBE_APISERVER, apiserver_sans(config))
    for name, (common_name, organization) in CLIENTS.items():
        if name not in bundle:
            bundle[name] = make_signed(name, ca, common_name, organization=organization)
    if PROXY_CLIENT not in bundle:
        bundle[PROXY_CLIENT] = make_signed(PROXY_CLIENT, bundle[REQUESTHEADER_CA], PROXY_CLIENT, server=True)

    _drop_unused(bundle, lambda n: n.startswith(ETCD_PREFIX + "-"), {etcd_cert_name(n) for n in etcd_hosts})
    sans = etcd_sans(config)
    for node in etcd_hosts:
        _ensure_server(bundle, etcd_cert_name(node), ca, ETCD_PREFIX, sans)
    if config.services.etcd.external_urls:
        bundle.update(_external_etcd(config))

    wanted = {cert_name_for_host(n, KUBELET_PREFIX) for n in kubelet_hosts}
    _drop_unused(bundle, lambda n: n.startswith(KUBELET_PREFIX + "-"), wanted)
    for node in kubelet_hosts:
        name = cert_name_for_host(node, KUBELET_PREFIX)
        _ensure_server(bundle, name, ca, name, host_sans(node))


# What `--service NAME` re-issues (RKE's `RotateRKECertificates`): the certificates each component presents.
SERVICES: dict[str, Callable[[str], bool]] = {
    "etcd": lambda n: n.startswith(ETCD_PREFIX + "-"),
    "kube-apiserver": lambda n: n == KUBE_APISERVER,
    "kube-controller-manager": lambda n: n == KUBE_CONTROLLER_MANAGER,
    "kube-scheduler": lambda n: n == KUBE_SCHEDULER,
    "kubelet": lambda n: n == KUBE_NODE or n.startswith(KUBELET_PREFIX + "-"),
    "kube-proxy": lambda n: n == KUBE_PROXY,
}


def rotate(
    config: ClusterConfig, bundle: Bundle, services: Iterable[str] = (), *, ca: bool = False
) -> Bundle:
    """RKE's certificate rotation: new keys and certificates for the listed services' certificates, or for
    every certificate rke-py makes when none is listed; with `ca`, new CAs too and everything re-signed.
    The service-account key is kept either way (RKE keeps it), so the pods' tokens stay valid; its
    certificate is signed anew with the apiserver's (RKE leaves it to expire with the others, and then no
    rotation renews it)."""
    services = tuple(services)
    if not ca:
        _check_ca(bundle[CA])
        until = bundle[CA].x509.not_valid_after_utc
        if until <= dt.datetime.now(dt.UTC):
            raise CertificateError(f"the CA certificate kube-ca expired on {until:%Y-%m-%d}: use --rotate-ca")

    def rotated(name: str) -> bool:
        if name in EXTERNAL:
            return False
        if ca:
            return True
        if name == SERVICE_ACCOUNT:  # its key is kept, its certificate renewed
            return not services or "kube-apiserver" in services
        if services:
            return any(SERVICES[s](name) for s in services)
        return name not in (CA, REQUESTHEADER_CA)

    kept = {name: pair for name, pair in bundle.items() if not rotated(name)}
    if ca:
        with keys_ahead(2):
            kept[CA], kept[REQUESTHEADER_CA] = make_ca(CA), make_ca(REQUESTHEADER_CA)
    service_account = bundle.get(SERVICE_ACCOUNT)
    if service_account is not None and SERVICE_ACCOUNT not in kept:
        common_name, _ = CLIENTS[SERVICE_ACCOUNT]
        kept[SERVICE_ACCOUNT] = make_signed(SERVICE_ACCOUNT, kept[CA], common_name, key=service_account.key)
    return build_bundle(config, kept)
