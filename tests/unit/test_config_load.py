"""Loading good cluster.yml files: RKE's defaults, positions, warnings and the `rke config` format."""

from __future__ import annotations

from pathlib import Path

import pytest

from rke_py.config import kdm, load, load_text
from rke_py.config.schema import CloudProvider
from rke_py.errors import ConfigError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "config"
EXAMPLE = Path(__file__).parents[2] / "cluster.yml.example"
KDM = kdm.system_images(kdm.DEFAULT_K8S_VERSION)


def good(name: str):
    loaded = load(FIXTURES / "good" / name)
    assert loaded.warnings == []
    return loaded.config


def test_minimal_file_gets_rke_cluster_defaults():
    config = good("minimal.yml")
    assert config.cluster_name == "local"
    assert config.ssh_key_path == "~/.ssh/id_rsa"
    assert config.kubernetes_version == "v1.30.4-rancher1-1"
    assert config.prefix_path == "/"
    assert config.network.plugin == "canal"
    assert config.network.options["canal_flannel_backend_type"] == "vxlan"
    assert config.authentication.strategy == "x509"
    assert config.authorization.mode == "rbac"
    assert config.addon_job_timeout == 45
    assert config.enable_cri_dockerd is True
    assert config.ignore_docker_version is False
    assert config.upgrade_strategy.max_unavailable_worker == "10%"
    assert config.upgrade_strategy.max_unavailable_controlplane == "1"


def test_minimal_file_gets_rke_node_defaults():
    node = good("minimal.yml").nodes[0]
    assert node.port == "22"
    assert node.internal_address == "Node-1.Example.com"
    assert node.hostname_override == "node-1.example.com"
    assert node.name == "node-1.example.com"
    assert node.docker_socket == "/var/run/docker.sock"
    assert node.ssh_key_path == "~/.ssh/id_rsa"


def test_minimal_file_gets_rke_service_defaults():
    services = good("minimal.yml").services
    assert services.kube_api.service_cluster_ip_range == "10.43.0.0/16"
    assert services.kube_controller.service_cluster_ip_range == "10.43.0.0/16"
    assert services.kube_controller.cluster_cidr == "10.42.0.0/16"
    assert services.kube_api.service_node_port_range == "30000-32767"
    assert services.kubelet.cluster_domain == "cluster.local"
    assert services.kubelet.cluster_dns_server == "10.43.0.10"
    assert services.kubelet.infra_container_image == "rancher/mirrored-pause:3.7"
    etcd = services.etcd
    assert (etcd.snapshot, etcd.retention, etcd.creation) == (True, "72h", "12h")
    assert etcd.extra_args == {"election-timeout": "5000", "heartbeat-interval": "500"}
    assert etcd.backup_config is not None
    assert (etcd.backup_config.interval_hours, etcd.backup_config.retention) == (12, 6)


def test_minimal_file_gets_the_default_versions_images():
    images = good("minimal.yml").system_images
    assert images.etcd == "rancher/mirrored-coreos-etcd:v3.5.12"
    assert images.kubernetes == "rancher/hyperkube:v1.30.4-rancher1"
    tools = {images.alpine, images.nginx_proxy, images.cert_downloader, images.kubernetes_services_sidecar}
    assert tools == {"rancher/rke-tools:v0.1.102"}
    assert images.pod_infra_container == "rancher/mirrored-pause:3.7"


def test_values_the_user_wrote_win():
    config = good("overrides.yml")
    assert (config.cluster_name, config.prefix_path, config.addon_job_timeout) == ("prod", "/opt/rke", 90)
    assert config.ignore_docker_version is True  # honoured, unlike RKE's CLI (#3181)
    cp, worker = config.nodes
    assert (cp.internal_address, cp.hostname_override, cp.port) == ("10.0.0.11", "cp-1", "22")
    assert (cp.ssh_key, cp.ssh_key_path) == ("not-a-real-key", "~/.ssh/id_rsa")  # as RKE; ssh_key wins
    assert cp.labels == {"zone": "a", "rack": "7"}
    assert str(worker.taints[0]) == "dedicated=gpu:NoSchedule"
    assert config.services.etcd.snapshot is False
    assert config.services.etcd.backup_config is None
    assert config.services.etcd.extra_args == {"election-timeout": "6000", "heartbeat-interval": "500"}


def test_one_service_range_is_shared_and_moves_the_dns_address():
    services = good("overrides.yml").services
    assert services.kube_controller.service_cluster_ip_range == "10.96.0.0/12"
    assert services.kubelet.cluster_dns_server == "10.96.0.10"
    assert services.kube_api.extra_args_array == {
        "tls-cipher-suites": ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384"]
    }


def test_other_rke_keys_are_kept():
    config = good("overrides.yml")
    assert config.network.extra == {"calico_network_provider": {"cloud_provider": "none"}}
    assert config.network.options["calico_cloud_provider"] == "none"
    assert config.upgrade_strategy.max_unavailable_worker == "2"
    assert config.restore == {"restore": False, "snapshot_name": ""}
    assert config.cri_dockerd_stream_server_port == "10010"
    assert config.bastion_host is not None
    assert (config.bastion_host.port, config.bastion_host.ssh_key_path) == ("22", "~/.ssh/id_rsa")


def test_default_registry_prefixes_every_system_image_once():
    config = good("private_registry.yml")
    images = config.system_images
    assert images.etcd == "registry.example.com:5000/rancher/mirrored-coreos-etcd:v3.5.12"
    assert images.nginx_proxy == "registry.example.com:5000/mirror/nginx:1.25"
    assert images.kubernetes == f"registry.example.com:5000/{KDM['kubernetes']}"
    infra = config.services.kubelet.infra_container_image
    assert infra == "registry.example.com:5000/rancher/mirrored-pause:3.7"


def test_node_settings_from_the_cluster_level():
    node = good("private_registry.yml").nodes[0]
    assert (node.port, node.ssh_key_path, node.ssh_agent_auth) == ("2222", "/keys/node1", True)


def test_unknown_version_with_explicit_images_loads():
    config = good("custom_version.yml")
    assert config.system_images.kubernetes == "rancher/hyperkube:v1.31.1-rancher1"
    assert config.system_images.cert_downloader == "rancher/rke-tools:v0.1.105"
    assert config.system_images.coredns == ""
    assert config.enable_cri_dockerd is True


def test_file_written_by_rke_config_loads_with_empty_meaning_default():
    loaded = load(FIXTURES / "rke_config_full.yml", strict=True)
    config = loaded.config
    assert loaded.warnings == []
    assert len(config.nodes) == 3
    assert config.bastion_host is None
    assert config.cluster_name == "local"
    assert config.kubernetes_version == kdm.DEFAULT_K8S_VERSION
    assert config.services.kube_api.service_node_port_range == "30000-32767"
    assert config.services.etcd.snapshot is True
    assert config.nodes[0].hostname_override == "192.0.2.11"
    assert config.cloud_provider == CloudProvider()
    assert (config.dns.provider, config.ingress.provider, config.monitoring.provider) == (
        "coredns",
        "nginx",
        "metrics-server",
    )


def test_example_file_loads_without_warnings():
    loaded = load(EXAMPLE, strict=True)
    config = loaded.config
    assert loaded.warnings == []
    assert [n.role for n in config.nodes] == [["etcd", "controlplane"]] * 3 + [["worker"]] * 2
    assert all(n.address.startswith("192.0.2.") for n in config.nodes)
    assert config.services.kubelet.extra_args == {"max-pods": "110"}


def test_positions_name_every_key_and_item_one_based():
    config = good("minimal.yml")
    assert config.positions[("nodes",)] == (2, 1)
    assert config.positions[("nodes", 0)] == (3, 5)
    assert config.positions[("nodes", 0, "address")] == (3, 5)
    assert config.positions[("nodes", 0, "role", 2)] == (5, 32)
    assert ("cluster_name",) not in config.positions  # a default, not written by the user


def test_strict_turns_warnings_into_errors():
    text = (FIXTURES / "good" / "minimal.yml").read_text() + "services:\n  etcd:\n    snapshots: true\n"
    assert [str(w) for w in load_text(text).warnings] == [
        'cluster.yml:8:5: warning: unknown key "snapshots" under "services.etcd" is ignored'
        ' — remove it or check the spelling (did you mean "snapshot"?)'
    ]
    with pytest.raises(ConfigError) as caught:
        load_text(text, strict=True)
    assert [p.severity for p in caught.value.problems] == ["error"]
    assert caught.value.exit_status == 2


def test_errors_come_before_warnings_and_are_sorted_by_line():
    text = "foo: 1\nnodes:\n  - address: a\n    role: [worker]\n  - user: u\n    role: [etcd, controlplane]\n"
    with pytest.raises(ConfigError) as caught:
        load_text(text)
    found = [(p.severity, p.line) for p in caught.value.problems]
    assert found == [("error", 3), ("error", 5), ("warning", 1)]


def test_missing_file_names_the_path_and_the_fix(tmp_path: Path):
    path = tmp_path / "nope.yml"
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value) == (
        f'{path}: config file not found — run "rke-py config" to write one, or pass --config PATH'
    )


def test_yaml_anchors_and_merge_keys_work():
    text = (
        "x-node: &node\n  user: ubuntu\n  role: [etcd, controlplane, worker]\n"
        "nodes:\n  - <<: *node\n    address: 192.0.2.11\n"
    )
    loaded = load_text(text)
    assert (loaded.config.nodes[0].user, loaded.config.nodes[0].address) == ("ubuntu", "192.0.2.11")
    assert [w.line for w in loaded.warnings] == [1]  # x-node is not an RKE key


def test_problems_cite_the_file_name_given():
    with pytest.raises(ConfigError) as caught:
        load_text("nodes: []\n", "site/prod.yml")
    assert str(caught.value).startswith("site/prod.yml:1:1: no nodes")
