"""RKE's defaults (`rke:cluster/defaults.go`), applied to a freshly loaded ClusterConfig in place.

Only empty values are filled, so a value the user wrote always wins; `config.positions` still tells which
keys the file contained. Two deliberate differences from RKE:

* `ignore_docker_version` keeps the file's value. RKE's CLI overwrites it with its `--ignore-docker-version`
  flag, so `ignore_docker_version: true` has no effect there (RKE bug #3181).
* When only one of `services.kube-api.service_cluster_ip_range` and
  `services.kube-controller.service_cluster_ip_range` is set, the other takes its value (RKE would default
  it to 10.43.0.0/16 and then reject the mismatch). Two different values written by the user are an error.
* `services.kubelet.cluster_dns_server` defaults to the 10th address of the service range (10.43.0.10 for
  the default range), so changing only the range does not leave the DNS address outside it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Mapping

from rke_py.config import kdm
from rke_py.config.schema import AuthWebhook, BackupConfig, ClusterConfig, LinearAutoscalerParams, Node

CLUSTER_NAME = "local"
SSH_KEY_PATH = "~/.ssh/id_rsa"
SSH_PORT = "22"
DOCKER_SOCKET = "/var/run/docker.sock"
PREFIX_PATH = "/"
NETWORK_PLUGIN = "canal"
AUTH_STRATEGY = "x509"
AUTHN_CACHE_TIMEOUT = "5s"
# RKE's default token webhook kubeconfig (`templates.AuthnWebhook`): Rancher's kube-api-auth answers on
# 127.0.0.1:6440 on every controlplane node. Kept as RKE writes it, so the file's bytes match.
AUTHN_WEBHOOK_CONFIG = """
apiVersion: v1
kind: Config
clusters:
- name: Default
  cluster:
    insecure-skip-tls-verify: true
    server: http://127.0.0.1:6440/v1/authenticate
users:
- name: Default
  user:
    insecure-skip-tls-verify: true
current-context: webhook
contexts:
- name: webhook
  context:
    user: Default
    cluster: Default
"""
AUTHZ_MODE = "rbac"
SERVICE_CLUSTER_IP_RANGE = "10.43.0.0/16"
CLUSTER_CIDR = "10.42.0.0/16"
SERVICE_NODE_PORT_RANGE = "30000-32767"
CLUSTER_DOMAIN = "cluster.local"
CLUSTER_DNS_SERVER = "10.43.0.10"
ETCD_RETENTION = "72h"
ETCD_CREATION = "12h"
ETCD_EXTRA_ARGS = {"election-timeout": "5000", "heartbeat-interval": "500"}
MAX_UNAVAILABLE_WORKER = "10%"
MAX_UNAVAILABLE_CONTROLPLANE = "1"
ADDON_JOB_TIMEOUT = 45
CRI_DOCKERD_FROM = (1, 24)
FLEXVOL_DIR = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/nodeagent~uds"
NETWORK_OPTIONS = {
    "canal": {
        "canal_flannel_backend_type": "vxlan",
        "canal_flannel_backend_port": "8472",
        "canal_flannel_backend_vni": "1",
        "canal_flex_volume_plugin_dir": FLEXVOL_DIR,
    },
    "flannel": {
        "flannel_backend_type": "vxlan",
        "flannel_backend_port": "8472",
        "flannel_backend_vni": "1",
    },
    "calico": {"calico_cloud_provider": "none", "calico_flex_volume_plugin_dir": FLEXVOL_DIR},
}
PROVIDER_OPTIONS = {
    ("canal_network_provider", "iface"): "canal_iface",
    ("flannel_network_provider", "iface"): "flannel_iface",
    ("calico_network_provider", "cloud_provider"): "calico_cloud_provider",
}
DNS_PROVIDER = "coredns"
INGRESS_PROVIDER = "nginx"
MONITORING_PROVIDER = "metrics-server"
INGRESS_NETWORK_MODE = "hostPort"  # Kubernetes v1.21 and later
INGRESS_HTTP_PORT, INGRESS_HTTPS_PORT = 80, 443


def apply(config: ClusterConfig, recorded: kdm.Recorded | None = None) -> None:
    """Fill every empty value of `config` with RKE's default; `recorded`: the images the cluster's state
    holds, the defaults for a version rke-py does not list."""
    _cluster(config)
    for node in config.nodes:
        _node(config, node)
    _bastion(config)
    _network(config)
    _addons(config)
    _services(config)
    _upgrade_strategy(config)
    _system_images(config, recorded)
    _kubelet_infra_image(config)
    _cri_dockerd(config)


def _cluster(config: ClusterConfig) -> None:
    config.cluster_name = config.cluster_name or CLUSTER_NAME
    config.ssh_key_path = config.ssh_key_path or SSH_KEY_PATH
    config.kubernetes_version = config.kubernetes_version or kdm.DEFAULT_K8S_VERSION
    config.prefix_path = config.prefix_path or PREFIX_PATH
    config.addon_job_timeout = config.addon_job_timeout or ADDON_JOB_TIMEOUT
    if config.ignore_docker_version is None:
        config.ignore_docker_version = False
    config.authentication.strategy = config.authentication.strategy or AUTH_STRATEGY
    _webhook(config)
    config.authorization.mode = config.authorization.mode or AUTHZ_MODE


def _webhook(config: ClusterConfig) -> None:
    """RKE's `setClusterAuthnDefaults`: the webhook strategy implies a webhook, and a webhook gets RKE's
    config file and cache timeout where the file leaves them empty."""
    auth = config.authentication
    if auth.webhook is None and "webhook" in auth.strategy.split("|"):
        auth.webhook = AuthWebhook()
    if auth.webhook is not None:
        auth.webhook.config_file = auth.webhook.config_file or AUTHN_WEBHOOK_CONFIG
        auth.webhook.cache_timeout = auth.webhook.cache_timeout or AUTHN_CACHE_TIMEOUT


def _node(config: ClusterConfig, node: Node) -> None:
    node.port = node.port or SSH_PORT
    node.internal_address = node.internal_address or node.address
    node.hostname_override = (node.hostname_override or node.address).lower()
    node.docker_socket = node.docker_socket or DOCKER_SOCKET
    node.ssh_key_path = node.ssh_key_path or config.ssh_key_path  # as RKE; an inline ssh_key still wins
    node.ssh_cert_path = node.ssh_cert_path or config.ssh_cert_path
    node.ssh_agent_auth = config.ssh_agent_auth


def _bastion(config: ClusterConfig) -> None:
    """An empty bastion_host (as `rke config` writes it) means no bastion."""
    bastion = config.bastion_host
    if bastion is None or not (bastion.address or bastion.user):
        config.bastion_host = None
        return
    bastion.port = bastion.port or SSH_PORT
    bastion.ssh_key_path = bastion.ssh_key_path or config.ssh_key_path
    bastion.ssh_agent_auth = config.ssh_agent_auth


def _network(config: ClusterConfig) -> None:
    network = config.network
    network.plugin = network.plugin or NETWORK_PLUGIN
    provided = {  # RKE's provider sections are another way to write these options
        option: str(value)
        for (section, key), option in PROVIDER_OPTIONS.items()
        if option.startswith(f"{network.plugin}_")
        and isinstance(sub := network.extra.get(section), dict)
        and (value := sub.get(key))
    }
    network.options = {**NETWORK_OPTIONS.get(network.plugin, {}), **provided, **network.options}


def _addons(config: ClusterConfig) -> None:
    dns, ingress, monitoring = config.dns, config.ingress, config.monitoring
    dns.provider = dns.provider or DNS_PROVIDER
    if dns.linear_autoscaler_params is None:  # as RKE: given ones are taken as they are, unset fields off
        dns.linear_autoscaler_params = LinearAutoscalerParams(128, 4, 1, 0, True)
    ingress.provider = ingress.provider or INGRESS_PROVIDER
    ingress.network_mode = ingress.network_mode or INGRESS_NETWORK_MODE
    ingress.http_port = ingress.http_port or INGRESS_HTTP_PORT
    ingress.https_port = ingress.https_port or INGRESS_HTTPS_PORT
    if ingress.default_backend is None:
        ingress.default_backend = False
    if ingress.default_ingress_class is None:
        ingress.default_ingress_class = True
    monitoring.provider = monitoring.provider or MONITORING_PROVIDER
    monitoring.replicas = monitoring.replicas or 1


def _services(config: ClusterConfig) -> None:
    services = config.services
    api, controller, kubelet = services.kube_api, services.kube_controller, services.kubelet
    shared = api.service_cluster_ip_range or controller.service_cluster_ip_range or SERVICE_CLUSTER_IP_RANGE
    api.service_cluster_ip_range = api.service_cluster_ip_range or shared
    controller.service_cluster_ip_range = controller.service_cluster_ip_range or shared
    api.service_node_port_range = api.service_node_port_range or SERVICE_NODE_PORT_RANGE
    controller.cluster_cidr = controller.cluster_cidr or CLUSTER_CIDR
    kubelet.cluster_domain = kubelet.cluster_domain or CLUSTER_DOMAIN
    kubelet.cluster_dns_server = kubelet.cluster_dns_server or _dns_server(api.service_cluster_ip_range)
    _etcd(config)


def _dns_server(service_range: str) -> str:
    """The 10th address of the (first) service network: 10.43.0.10 for the default range."""
    try:
        network = ipaddress.ip_network(service_range.split(",")[0].strip())
    except ValueError:
        return CLUSTER_DNS_SERVER
    return str(network.network_address + 10)


def _etcd(config: ClusterConfig) -> None:
    etcd = config.services.etcd
    if etcd.snapshot is None:
        etcd.snapshot = True
    # The older `creation`/`retention` durations rule the recurring snapshots when the file has them and no
    # backup_config; otherwise backup_config's defaults do (every 12 hours, 6 kept).
    if etcd.backup_config is None and etcd.snapshot and not (etcd.creation or etcd.retention):
        etcd.backup_config = BackupConfig()
    etcd.retention = etcd.retention or ETCD_RETENTION
    etcd.creation = etcd.creation or ETCD_CREATION
    etcd.extra_args = {**ETCD_EXTRA_ARGS, **etcd.extra_args}
    if etcd.backup_config is not None:
        _backup_config(etcd.backup_config)


def _backup_config(backup: BackupConfig) -> None:
    if backup.enabled is None:
        backup.enabled = True
    backup.interval_hours = backup.interval_hours or 12
    backup.retention = backup.retention or 6
    backup.timeout = backup.timeout or 300


def _upgrade_strategy(config: ClusterConfig) -> None:
    strategy = config.upgrade_strategy
    strategy.max_unavailable_worker = strategy.max_unavailable_worker or MAX_UNAVAILABLE_WORKER
    strategy.max_unavailable_controlplane = (
        strategy.max_unavailable_controlplane or MAX_UNAVAILABLE_CONTROLPLANE
    )


def _system_images(config: ClusterConfig, recorded: kdm.Recorded | None) -> None:
    """Fill images from the KDM table, then prefix every image with the default registry (RKE `d()`)."""
    images = config.system_images
    known: Mapping[str, str] = kdm.system_images(config.kubernetes_version, recorded) or {}
    registry = default_registry(config)
    for field in dataclasses.fields(images):
        if field.name == "extra":
            continue
        image = getattr(images, field.name) or known.get(field.name, "")
        if image and registry and not image.startswith(registry):
            image = f"{registry}/{image}"
        setattr(images, field.name, image)
    images.cert_downloader = images.cert_downloader or images.alpine
    config.services.etcd.image = images.etcd
    for service in (config.services.kube_api, config.services.kube_controller, config.services.scheduler):
        service.image = images.kubernetes
    config.services.kubelet.image = config.services.kubeproxy.image = images.kubernetes


def default_registry(config: ClusterConfig) -> str:
    """URL of the first private registry marked is_default, or ""."""
    return next((r.url.rstrip("/") for r in config.private_registries if r.is_default and r.url), "")


def _kubelet_infra_image(config: ClusterConfig) -> None:
    kubelet = config.services.kubelet
    kubelet.infra_container_image = kubelet.infra_container_image or config.system_images.pod_infra_container


def _cri_dockerd(config: ClusterConfig) -> None:
    version = kdm.parse_version(config.kubernetes_version)
    if config.enable_cri_dockerd is None and version is not None:
        config.enable_cri_dockerd = version[:2] >= CRI_DOCKERD_FROM
