"""The certificate bundle: RKE's set, names, SANs, usages, and the rule that certificates are kept."""

from __future__ import annotations

import datetime as dt
import ipaddress
import threading
from dataclasses import replace

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from rke_py.config.schema import ClusterConfig, Node
from rke_py.pki import CertificateError, build_bundle, certs, etcd_cert_name
from rke_py.pki.bundle import kubernetes_service_ips
from rke_py.pki.certs import make_ca, make_signed

IP = ipaddress.ip_address
K8S_DNS = {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}


def node(n: int, *roles: str, **kw: str) -> Node:
    return Node(
        address=kw.get("address", f"10.1.0.{n}"),
        internal_address=kw.get("internal_address", f"172.20.0.{n}"),
        hostname_override=kw.get("hostname_override", f"node-{n}"),
        role=list(roles),
        user="rke",
    )


def cluster(*nodes: Node, cidr: str = "10.43.0.0/16", domain: str = "cluster.local") -> ClusterConfig:
    config = ClusterConfig(nodes=list(nodes), cluster_name="local", prefix_path="/")
    config.services.kube_api.service_cluster_ip_range = cidr
    config.services.kubelet.cluster_domain = domain
    return config


def five_nodes() -> ClusterConfig:
    return cluster(
        node(1, "controlplane", "etcd"),
        node(2, "controlplane", "etcd"),
        node(3, "etcd", "worker"),
        node(4, "worker"),
        node(5, "worker"),
    )


@pytest.fixture(scope="module")
def config() -> ClusterConfig:
    return five_nodes()


@pytest.fixture(scope="module")
def bundle(config):
    return build_bundle(config)


@pytest.fixture(scope="module")
def rke_fixture():
    """RKE's own pki_test cluster: one controlplane node, service CIDR 10.0.0.1/24, domain cluster.test."""
    config = cluster(
        Node(
            address="1.1.1.1",
            internal_address="192.168.1.5",
            hostname_override="server1",
            role=["controlplane"],
        ),
        cidr="10.0.0.1/24",
        domain="cluster.test",
    )
    return config, build_bundle(config)


def usages(pair) -> set:
    return set(pair.x509.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def key_usage(pair) -> x509.KeyUsage:
    return pair.x509.extensions.get_extension_for_class(x509.KeyUsage).value


def test_bundle_is_exactly_rkes_set(bundle):
    assert set(bundle) == {
        "kube-ca",
        "kube-apiserver-requestheader-ca",
        "kube-apiserver",
        "kube-service-account-token",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-proxy",
        "kube-node",
        "kube-admin",
        "kube-apiserver-proxy-client",
        "kube-etcd-172-20-0-1",
        "kube-etcd-172-20-0-2",
        "kube-etcd-172-20-0-3",
    }
    assert all(pair.name == name for name, pair in bundle.items())


def test_every_certificate_chains_to_its_ca(bundle):
    for name, pair in bundle.items():
        signer = {
            "kube-ca": "kube-ca",
            "kube-apiserver-requestheader-ca": "kube-apiserver-requestheader-ca",
            "kube-apiserver-proxy-client": "kube-apiserver-requestheader-ca",
        }.get(name, "kube-ca")
        pair.x509.verify_directly_issued_by(bundle[signer].x509)  # raises if not
        assert pair.key_matches(), name
        # Like RKE, a leaf's PEM is the leaf followed by its CA.
        assert [c.subject for c in pair.chain[1:]] == (
            [] if signer == name else [bundle[signer].x509.subject]
        )


def test_cas_are_ten_year_self_signed_cas(bundle):
    for name in ("kube-ca", "kube-apiserver-requestheader-ca"):
        ca = bundle[name]
        assert ca.common_name == name
        constraints = ca.x509.extensions.get_extension_for_class(x509.BasicConstraints)
        assert constraints.value.ca and constraints.critical
        ku = key_usage(ca)
        assert ku.key_cert_sign and ku.digital_signature and ku.key_encipherment
        validity = ca.x509.not_valid_after_utc - ca.x509.not_valid_before_utc
        assert validity == dt.timedelta(days=3650)
        assert ca.x509.public_key().key_size == 2048


def test_leaves_are_dated_from_the_ca_and_valid_ten_years(bundle):
    now = dt.datetime.now(dt.UTC)
    for name, pair in bundle.items():
        if name in ("kube-ca", "kube-apiserver-requestheader-ca"):
            continue
        signer = "kube-apiserver-requestheader-ca" if name == "kube-apiserver-proxy-client" else "kube-ca"
        ca = bundle[signer].x509
        assert pair.x509.not_valid_before_utc == ca.not_valid_before_utc, name
        assert abs(pair.x509.not_valid_after_utc - (now + dt.timedelta(days=3650))) < dt.timedelta(minutes=5)
        assert pair.x509.public_key().key_size == 2048
        ku = key_usage(pair)
        assert ku.digital_signature and ku.key_encipherment and not ku.key_cert_sign, name


@pytest.mark.parametrize(
    ("name", "cn", "org", "server"),
    [
        ("kube-apiserver", "kube-apiserver", "", True),
        ("kube-service-account-token", "kube-service-account-token", "", False),
        ("kube-controller-manager", "system:kube-controller-manager", "", False),
        ("kube-scheduler", "system:kube-scheduler", "", False),
        ("kube-proxy", "system:kube-proxy", "", False),
        ("kube-node", "system:node", "system:nodes", False),
        ("kube-admin", "kube-admin", "system:masters", False),
        ("kube-apiserver-proxy-client", "kube-apiserver-proxy-client", "", True),
        ("kube-etcd-172-20-0-1", "kube-etcd", "", True),
    ],
)
def test_subjects_and_usages(bundle, name, cn, org, server):
    pair = bundle[name]
    assert (pair.common_name, pair.organization) == (cn, org)
    expected = {ExtendedKeyUsageOID.CLIENT_AUTH} | ({ExtendedKeyUsageOID.SERVER_AUTH} if server else set())
    assert usages(pair) == expected


def test_apiserver_sans_match_rkes_pki_test(rke_fixture):
    _, bundle = rke_fixture
    dns, ips = bundle["kube-apiserver"].sans()
    assert dns == K8S_DNS | {"kubernetes.default.svc.cluster.test", "server1"}
    assert ips == {IP("1.1.1.1"), IP("192.168.1.5"), IP("127.0.0.1"), IP("10.0.0.1")}


def test_apiserver_sans_cover_every_controlplane_node_and_extra_sans():
    config = cluster(
        node(1, "controlplane"),
        node(2, "controlplane", address="cp2.example.test", internal_address="cp2.internal"),
        node(3, "worker"),
    )
    config.authentication.sans = ["api.example.test", "203.0.113.7"]
    dns, ips = build_bundle(config)["kube-apiserver"].sans()
    assert dns == K8S_DNS | {
        "kubernetes.default.svc.cluster.local",
        "node-1",
        "node-2",
        "cp2.example.test",
        "cp2.internal",
        "api.example.test",
    }
    assert ips == {IP("10.1.0.1"), IP("172.20.0.1"), IP("127.0.0.1"), IP("10.43.0.1"), IP("203.0.113.7")}


def test_etcd_certs_name_every_etcd_host(bundle):
    dns, ips = bundle["kube-etcd-172-20-0-3"].sans()
    assert dns == K8S_DNS | {"kubernetes.default.svc.cluster.local", "node-1", "node-2", "node-3"}
    hosts = {IP(f"10.1.0.{n}") for n in (1, 2, 3)} | {IP(f"172.20.0.{n}") for n in (1, 2, 3)}
    assert ips == hosts | {IP("127.0.0.1"), IP("10.43.0.1")}
    # every etcd host gets its own key
    keys = {bundle[f"kube-etcd-172-20-0-{n}"].key_pem for n in (1, 2, 3)}
    assert len(keys) == 3


@pytest.mark.parametrize(
    ("address", "internal", "expected"),
    [
        ("10.0.0.1", "172.26.14.216", "kube-etcd-172-26-14-216"),
        ("10.0.0.1", "", "kube-etcd-10-0-0-1"),
        ("10.0.0.1", "10.0.0.1", "kube-etcd-10-0-0-1"),
        ("Host-A.Example.COM", "", "kube-etcd-host-a-example-com"),
    ],
)
def test_etcd_cert_name(address, internal, expected):
    assert etcd_cert_name(Node(address=address, internal_address=internal)) == expected


@pytest.mark.parametrize(
    ("cidr", "expected"),
    [
        ("10.43.0.0/16", ["10.43.0.1"]),
        ("10.0.0.1/24", ["10.0.0.1"]),
        ("10.43.0.0/16,fd98::/108", ["10.43.0.1", "fd98::1"]),
    ],
)
def test_kubernetes_service_ip_is_first_address_of_each_range(cidr, expected):
    assert kubernetes_service_ips(cidr) == [IP(e) for e in expected]


def test_rebuilding_with_the_state_changes_nothing(config, bundle):
    again = build_bundle(config, bundle)
    assert {n: (p.cert_pem, p.key_pem) for n, p in again.items()} == {
        n: (p.cert_pem, p.key_pem) for n, p in bundle.items()
    }


def test_adding_a_controlplane_node_resigns_apiserver_with_the_same_key(config, bundle):
    grown = replace(config, nodes=[*config.nodes, node(6, "controlplane")])
    after = build_bundle(grown, bundle)
    assert after["kube-apiserver"].cert_pem != bundle["kube-apiserver"].cert_pem
    assert after["kube-apiserver"].key_pem == bundle["kube-apiserver"].key_pem
    dns, ips = after["kube-apiserver"].sans()
    assert "node-6" in dns and {IP("10.1.0.6"), IP("172.20.0.6")} <= ips
    unchanged = set(bundle) - {"kube-apiserver"}
    assert all(after[n] is bundle[n] for n in unchanged)


def test_removing_a_controlplane_node_keeps_the_apiserver_cert(config, bundle):
    shrunk = replace(config, nodes=[n for n in config.nodes if n.address != "10.1.0.2"])
    shrunk.nodes.append(node(2, "etcd"))  # stays an etcd member, leaves the control plane
    after = build_bundle(shrunk, bundle)
    assert after["kube-apiserver"].cert_pem == bundle["kube-apiserver"].cert_pem


def test_removed_etcd_node_loses_its_cert_and_others_are_kept(config, bundle):
    shrunk = replace(config, nodes=[n for n in config.nodes if n.address != "10.1.0.3"])
    after = build_bundle(shrunk, bundle)
    assert "kube-etcd-172-20-0-3" not in after
    assert after["kube-etcd-172-20-0-1"] is bundle["kube-etcd-172-20-0-1"]
    assert after["kube-etcd-172-20-0-2"] is bundle["kube-etcd-172-20-0-2"]


def test_added_etcd_node_gets_a_cert_and_peers_are_resigned_keeping_keys(config, bundle):
    grown = replace(config, nodes=[*config.nodes, node(7, "etcd")])
    after = build_bundle(grown, bundle)
    assert after["kube-etcd-172-20-0-7"].key_pem not in {p.key_pem for p in bundle.values()}
    for n in (1, 2, 3):
        name = f"kube-etcd-172-20-0-{n}"
        assert after[name].key_pem == bundle[name].key_pem
        assert IP("172.20.0.7") in after[name].sans()[1]


def test_a_certificate_from_another_ca_is_an_error(config, bundle):
    stranger = make_ca("kube-ca")
    forged = make_signed("kube-node", stranger, "system:node", organization="system:nodes")
    with pytest.raises(CertificateError, match=r"kube-node .* not signed by the current kube-ca"):
        build_bundle(config, {**bundle, "kube-node": forged})


def test_a_key_that_does_not_match_its_certificate_is_an_error(config, bundle):
    swapped = replace(bundle["kube-proxy"], key_pem=bundle["kube-scheduler"].key_pem)
    with pytest.raises(CertificateError, match="kube-proxy"):
        build_bundle(config, {**bundle, "kube-proxy": swapped})


def test_certificates_without_their_ca_are_an_error(config, bundle):
    without_ca = {n: p for n, p in bundle.items() if n != "kube-ca"}
    with pytest.raises(CertificateError, match="no kube-ca"):
        build_bundle(config, without_ca)


def test_state_from_before_the_requestheader_ca_gets_one(config, bundle):
    legacy = {n: p for n, p in bundle.items() if not n.startswith("kube-apiserver-")}
    legacy["kube-apiserver"] = bundle["kube-apiserver"]
    after = build_bundle(config, legacy)
    after["kube-apiserver-proxy-client"].x509.verify_directly_issued_by(
        after["kube-apiserver-requestheader-ca"].x509
    )
    assert after["kube-ca"] is bundle["kube-ca"]


def test_kubelet_serving_certs_follow_generate_serving_certificate(config, bundle):
    serving = replace(config, services=replace(config.services))
    serving.services.kubelet = replace(config.services.kubelet, generate_serving_certificate=True)
    after = build_bundle(serving, bundle)
    kubelet = {n for n in after if n.startswith("kube-kubelet-")}
    assert kubelet == {f"kube-kubelet-172-20-0-{n}" for n in range(1, 6)}
    pair = after["kube-kubelet-172-20-0-4"]
    assert pair.common_name == "kube-kubelet-172-20-0-4"
    assert pair.sans() == ({"node-4"}, {IP("10.1.0.4"), IP("172.20.0.4")})
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages(pair)
    assert not any(n.startswith("kube-kubelet-") for n in build_bundle(config, after))


def test_external_etcd_uses_the_given_client_certificate(config, bundle):
    external_ca = make_ca("etcd-ca")
    client = make_signed("client", external_ca, "etcd-client")
    external = replace(config, services=replace(config.services))
    external.services.etcd = replace(
        config.services.etcd,
        external_urls=["https://etcd.example.test:2379"],
        ca_cert=external_ca.cert_pem,
        cert=client.cert_pem,
        key=client.key_pem,
    )
    after = build_bundle(external, bundle)
    assert not any(n.startswith("kube-etcd-172") for n in after)
    assert after["kube-etcd-client"].key_pem == client.key_pem
    assert after["kube-etcd-client-ca"].common_name == "etcd-ca"
    assert after["kube-etcd-client-ca"].key_pem == ""


def test_a_new_clusters_keys_are_made_ahead_one_each_and_a_kept_state_makes_none(config, monkeypatch):
    """Every key a new bundle needs comes from the threads that make them ahead (none wasted, none made
    while signing), each certificate its own; rebuilding from the state makes no key at all."""
    made: list[str] = []
    generate = certs._generate

    def recorded():
        made.append(threading.current_thread().name)
        return generate()

    monkeypatch.setattr(certs, "_generate", recorded)
    monkeypatch.setattr(certs.os, "cpu_count", lambda: 2)
    fresh = build_bundle(config)
    assert len(made) == len(fresh) == 13
    assert all(name.startswith("rke-py-keys") for name in made)
    spki = {p.x509.public_key().public_numbers().n for p in fresh.values()}
    assert len(spki) == len(fresh)
    made.clear()
    assert build_bundle(config, fresh) == fresh
    assert made == []
