"""What lands on each node (RKE `getCertKeys`), with which mode, and the kubeconfigs that point at it."""

from __future__ import annotations

import base64
from dataclasses import replace

import pytest
from cryptography import x509
from ruamel.yaml import YAML

from rke_py.config.schema import ClusterConfig, Node
from rke_py.pki import admin_kubeconfig, build_bundle, component_kubeconfig, default_server
from rke_py.pki.certs import make_ca, make_signed
from rke_py.plan.cert_files import node_files

SSL = "/etc/kubernetes/ssl"


def _node(n: int, *roles: str) -> Node:
    return Node(
        address=f"10.1.0.{n}",
        internal_address=f"172.20.0.{n}",
        hostname_override=f"node-{n}",
        role=list(roles),
        user="rke",
    )


@pytest.fixture(scope="module")
def config() -> ClusterConfig:
    config = ClusterConfig(
        nodes=[_node(1, "controlplane"), _node(2, "etcd"), _node(3, "etcd"), _node(4, "worker")],
        cluster_name="prod-east",
        prefix_path="/",
    )
    config.services.kube_api.service_cluster_ip_range = "10.43.0.0/16"
    config.services.kubelet.cluster_domain = "cluster.local"
    return config


@pytest.fixture(scope="module")
def bundle(config):
    return build_bundle(config)


def files_of(config, bundle, n: int) -> dict[str, object]:
    return {f.path: f for f in node_files(config, bundle, config.nodes[n - 1])}


def names(files) -> set[str]:
    return {p.removeprefix(SSL + "/") for p in files}


def load_yaml(text: str):
    return YAML(typ="safe").load(text)


def test_worker_gets_only_node_and_proxy_material(config, bundle):
    assert names(files_of(config, bundle, 4)) == {
        "kube-ca.pem",
        "kube-node.pem",
        "kube-node-key.pem",
        "kubecfg-kube-node.yaml",
        "kube-proxy.pem",
        "kube-proxy-key.pem",
        "kubecfg-kube-proxy.yaml",
    }


def test_controlplane_gets_ca_key_and_control_certs_but_no_etcd_keys(config, bundle):
    got = names(files_of(config, bundle, 1))
    assert {"kube-ca-key.pem", "kube-apiserver.pem", "kube-apiserver-key.pem"} <= got
    for name in (
        "kube-service-account-token",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-apiserver-requestheader-ca",
        "kube-apiserver-proxy-client",
    ):
        assert {f"{name}.pem", f"{name}-key.pem"} <= got, name
    kubeconfigs = {n for n in got if n.startswith("kubecfg-")}
    assert kubeconfigs == {
        f"kubecfg-{n}.yaml"
        for n in (
            "kube-node",
            "kube-proxy",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-apiserver-requestheader-ca",
            "kube-apiserver-proxy-client",
        )
    }
    assert not any("etcd" in n for n in got)


def test_etcd_node_gets_every_etcd_cert_and_no_ca_key(config, bundle):
    got = names(files_of(config, bundle, 2))
    etcd = {f"kube-etcd-172-20-0-{n}{suffix}" for n in (2, 3) for suffix in (".pem", "-key.pem")}
    assert etcd <= got
    assert "kube-ca-key.pem" not in got
    assert not any(n.startswith("kube-apiserver") for n in got)


def test_kube_admin_never_goes_to_a_node(config, bundle):
    for n in range(1, 5):
        assert not any("kube-admin" in p for p in files_of(config, bundle, n))


def test_modes_follow_cert_deployer_and_keys_are_secret(config, bundle):
    """rke-tools' cert-deployer writes every file 0600; kube-ca.pem is 0644 only for an etcd run as its
    own user (ETCD_UID and ETCD_GID), who must read it."""
    for n in range(1, 5):
        for path, f in files_of(config, bundle, n).items():
            assert f.mode == 0o600, path
            assert f.secret == path.endswith("-key.pem"), path
            if f.secret:
                assert f.content.startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    etcd_user = replace(
        config,
        services=replace(config.services, etcd=replace(config.services.etcd, uid=52034, gid=52034)),
    )
    for path, f in files_of(etcd_user, bundle, 1).items():
        assert f.mode == (0o644 if path.endswith("/kube-ca.pem") else 0o600), path


def test_file_content_is_the_bundle(config, bundle):
    files = files_of(config, bundle, 1)
    assert files[f"{SSL}/kube-apiserver.pem"].content == bundle["kube-apiserver"].cert_pem.encode()
    assert files[f"{SSL}/kube-apiserver-key.pem"].content == bundle["kube-apiserver"].key_pem.encode()


def test_same_inputs_give_byte_identical_files(config, bundle):
    again = build_bundle(config, bundle)
    for n in range(1, 5):
        first = [(f.path, f.sha256, f.mode) for f in node_files(config, bundle, config.nodes[n - 1])]
        second = [(f.path, f.sha256, f.mode) for f in node_files(config, again, config.nodes[n - 1])]
        assert first == second


def test_prefix_path_moves_host_paths_not_container_paths(config, bundle):
    prefixed = replace(config, prefix_path="/opt/rke")
    files = {f.path: f for f in node_files(prefixed, bundle, prefixed.nodes[3])}
    assert "/opt/rke/etc/kubernetes/ssl/kube-node.pem" in files
    assert all(p.startswith("/opt/rke/etc/kubernetes/ssl/") for p in files)
    kubeconfig = load_yaml(files["/opt/rke/etc/kubernetes/ssl/kubecfg-kube-node.yaml"].content.decode())
    assert kubeconfig["users"][0]["user"]["client-certificate"] == f"{SSL}/kube-node.pem"


def test_component_kubeconfig_points_at_local_apiserver_and_files(config, bundle):
    text = files_of(config, bundle, 1)[f"{SSL}/kubecfg-kube-controller-manager.yaml"].content.decode()
    doc = load_yaml(text)
    assert doc["current-context"] == "local"
    cluster = doc["clusters"][0]
    assert cluster["name"] == "local"
    assert cluster["cluster"] == {
        "api-version": "v1",
        "certificate-authority": f"{SSL}/kube-ca.pem",
        "server": "https://127.0.0.1:6443",
    }
    assert doc["contexts"][0] == {
        "name": "local",
        "context": {"cluster": "local", "user": "kube-controller-manager-local"},
    }
    assert doc["users"][0] == {
        "name": "kube-controller-manager-local",
        "user": {
            "client-certificate": f"{SSL}/kube-controller-manager.pem",
            "client-key": f"{SSL}/kube-controller-manager-key.pem",
        },
    }


def test_component_kubeconfig_is_rkes_text():
    assert component_kubeconfig("kube-node") == (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- cluster:\n"
        "    api-version: v1\n"
        "    certificate-authority: /etc/kubernetes/ssl/kube-ca.pem\n"
        '    server: "https://127.0.0.1:6443"\n'
        '  name: "local"\n'
        "contexts:\n"
        "- context:\n"
        '    cluster: "local"\n'
        '    user: "kube-node-local"\n'
        '  name: "local"\n'
        'current-context: "local"\n'
        "users:\n"
        '- name: "kube-node-local"\n'
        "  user:\n"
        "    client-certificate: /etc/kubernetes/ssl/kube-node.pem\n"
        "    client-key: /etc/kubernetes/ssl/kube-node-key.pem\n"
    )


def test_admin_kubeconfig_embeds_admin_credentials(config, bundle):
    server = default_server(config)
    assert server == "https://10.1.0.1:6443"
    doc = load_yaml(admin_kubeconfig(config, bundle, server))
    assert doc["current-context"] == "prod-east"
    assert doc["clusters"][0]["name"] == "prod-east"
    assert doc["clusters"][0]["cluster"]["server"] == server
    assert doc["contexts"][0]["context"] == {"cluster": "prod-east", "user": "kube-admin-prod-east"}
    user = doc["users"][0]
    assert user["name"] == "kube-admin-prod-east"
    ca = base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    cert = x509.load_pem_x509_certificate(base64.b64decode(user["user"]["client-certificate-data"]))
    key = base64.b64decode(user["user"]["client-key-data"]).decode()
    assert ca == bundle["kube-ca"].leaf_pem
    assert cert == bundle["kube-admin"].x509
    assert key == bundle["kube-admin"].key_pem


def test_a_cluster_name_with_quotes_stays_valid_yaml(config, bundle):
    odd = replace(config, cluster_name='a "quoted": name')
    doc = load_yaml(admin_kubeconfig(odd, bundle, "https://10.1.0.1:6443"))
    assert doc["current-context"] == 'a "quoted": name'


def test_external_etcd_client_certs_go_to_controlplane_nodes(config, bundle):
    ca = make_ca("etcd-ca")
    client = make_signed("client", ca, "etcd-client")
    external = replace(config, services=replace(config.services), nodes=[config.nodes[0], config.nodes[3]])
    external.services.etcd = replace(
        config.services.etcd,
        external_urls=["https://etcd.example.test:2379"],
        ca_cert=ca.cert_pem,
        cert=client.cert_pem,
        key=client.key_pem,
    )
    ext_bundle = build_bundle(external, bundle)
    got = names({f.path for f in node_files(external, ext_bundle, external.nodes[0])})
    assert {"kube-etcd-client.pem", "kube-etcd-client-key.pem", "kube-etcd-client-ca.pem"} <= got
    assert "kube-etcd-client-ca-key.pem" not in got
    assert not any(n.startswith("kubecfg-kube-etcd") for n in got)
