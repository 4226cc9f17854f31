"""The typed model of an RKE `cluster.yml`.

Field names are the YAML keys, so `config.services.kube_api.service_cluster_ip_range` reads like the file
(`services.kube-api.service_cluster_ip_range`; the three hyphenated service keys are the only renames).
Defaults here are the "empty" values; RKE's real defaults are filled in by `defaults.py` so that a value the
user wrote can be told apart from one rke-py chose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ROLES = ("etcd", "controlplane", "worker")


@dataclass
class Taint:
    key: str = ""
    value: str = ""
    effect: str = ""

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass
class Node:
    address: str = ""
    nodeName: str = ""  # Rancher's machine name: RKE ignores it (validate_ignored says so)
    port: str = "22"
    internal_address: str = ""
    role: list[str] = field(default_factory=list)
    hostname_override: str = ""
    user: str = ""
    docker_socket: str = ""
    ssh_key: str = ""
    ssh_key_path: str = ""
    ssh_cert: str = ""
    ssh_cert_path: str = ""
    ssh_agent_auth: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)

    def has(self, role: str) -> bool:
        return role in self.role

    @property
    def name(self) -> str:
        """The Kubernetes node name (hostname_override, defaulted to the lowercased address)."""
        return self.hostname_override or self.address.lower()


@dataclass
class BastionHost:
    address: str = ""
    port: str = "22"
    user: str = ""
    ssh_agent_auth: bool = False
    ssh_key: str = ""
    ssh_key_path: str = ""
    ssh_cert: str = ""
    ssh_cert_path: str = ""
    ignore_proxy_env_vars: bool = False


@dataclass
class ECRCredentialPlugin:
    aws_access_key_id: str = ""
    aws_secret_access_key: str = ""
    aws_session_token: str = ""


@dataclass
class PrivateRegistry:
    url: str = ""
    user: str = ""
    password: str = ""
    is_default: bool = False
    ecr_credential_plugin: ECRCredentialPlugin | None = None


@dataclass
class SystemImages:
    etcd: str = ""
    alpine: str = ""
    nginx_proxy: str = ""
    cert_downloader: str = ""
    kubernetes_services_sidecar: str = ""
    kubedns: str = ""
    dnsmasq: str = ""
    kubedns_sidecar: str = ""
    kubedns_autoscaler: str = ""
    coredns: str = ""
    coredns_autoscaler: str = ""
    nodelocal: str = ""
    kubernetes: str = ""
    flannel: str = ""
    flannel_cni: str = ""
    calico_node: str = ""
    calico_cni: str = ""
    calico_controllers: str = ""
    calico_ctl: str = ""
    calico_flexvol: str = ""
    canal_node: str = ""
    canal_cni: str = ""
    canal_controllers: str = ""
    canal_flannel: str = ""
    canal_flexvol: str = ""
    weave_node: str = ""
    weave_cni: str = ""
    pod_infra_container: str = ""
    ingress: str = ""
    ingress_backend: str = ""
    ingress_webhook: str = ""
    metrics_server: str = ""
    windows_pod_infra_container: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # the aci_* images, never used


@dataclass
class BaseService:
    image: str = ""  # ignored, as in RKE: system_images decides
    extra_args: dict[str, str] = field(default_factory=dict)
    extra_args_array: dict[str, list[str]] = field(default_factory=dict)
    extra_binds: list[str] = field(default_factory=list)
    extra_env: list[str] = field(default_factory=list)
    win_extra_args: dict[str, str] = field(default_factory=dict)
    win_extra_args_array: dict[str, list[str]] = field(default_factory=dict)
    win_extra_binds: list[str] = field(default_factory=list)
    win_extra_env: list[str] = field(default_factory=list)


@dataclass
class S3BackupConfig:
    access_key: str = ""
    secret_key: str = ""
    bucket_name: str = ""
    region: str = ""
    endpoint: str = ""  # HOST[:PORT], no scheme: always HTTPS, as RKE's snapshot tools
    custom_ca: str = ""  # PEM of the CA that signed the endpoint's certificate
    folder: str = ""


@dataclass
class BackupConfig:
    enabled: bool | None = None
    interval_hours: int = 0
    retention: int = 0
    s3backupconfig: S3BackupConfig | None = None
    safe_timestamp: bool = False
    timeout: int = 0


@dataclass
class ETCDService(BaseService):
    external_urls: list[str] = field(default_factory=list)
    ca_cert: str = ""
    cert: str = ""
    key: str = ""
    path: str = ""
    uid: int = 0
    gid: int = 0
    snapshot: bool | None = None
    retention: str = ""
    creation: str = ""
    backup_config: BackupConfig | None = None


@dataclass
class KubeAPIService(BaseService):
    service_cluster_ip_range: str = ""
    service_node_port_range: str = ""
    pod_security_configuration: str = ""
    pod_security_policy: bool = False  # RKE's; PodSecurityPolicy is gone from every version rke-py runs
    always_pull_images: bool = False
    secrets_encryption_config: dict[str, Any] | None = None
    audit_log: dict[str, Any] | None = None
    admission_configuration: dict[str, Any] | None = None
    event_rate_limit: dict[str, Any] | None = None


@dataclass
class KubeControllerService(BaseService):
    cluster_cidr: str = ""
    service_cluster_ip_range: str = ""


@dataclass
class KubeletService(BaseService):
    cluster_domain: str = ""
    infra_container_image: str = ""
    cluster_dns_server: str = ""
    fail_swap_on: bool = False
    generate_serving_certificate: bool = False


@dataclass
class Services:
    etcd: ETCDService = field(default_factory=ETCDService)
    kube_api: KubeAPIService = field(default_factory=KubeAPIService)  # YAML key: kube-api
    kube_controller: KubeControllerService = field(default_factory=KubeControllerService)  # kube-controller
    scheduler: BaseService = field(default_factory=BaseService)
    kubelet: KubeletService = field(default_factory=KubeletService)
    kubeproxy: BaseService = field(default_factory=BaseService)


@dataclass
class Toleration:
    """core/v1 Toleration, with its Kubernetes field names."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    tolerationSeconds: int | None = None


@dataclass
class Network:
    plugin: str = ""
    options: dict[str, str] = field(default_factory=dict)
    mtu: int = 0
    node_selector: dict[str, str] = field(default_factory=dict)
    # {strategy, rollingUpdate: {maxUnavailable, maxSurge}} as Kubernetes spells it (RKE re-reads it as JSON)
    update_strategy: dict[str, Any] = field(default_factory=dict)
    tolerations: list[Toleration] = field(default_factory=list)
    enable_br_netfilter: bool | None = None
    # Provider-specific sub-objects are kept as plain data.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class NodeLocal:
    ip_address: str = ""
    update_strategy: dict[str, Any] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    node_local_dns_priority_class_name: str = ""


@dataclass
class LinearAutoscalerParams:
    cores_per_replica: float = 0
    nodes_per_replica: float = 0
    min: int = 0
    max: int = 0
    prevent_single_point_failure: bool | None = None


# The dns.options keys each provider's add-on reads (RKE's names): its priority classes.
DNS_OPTIONS = {
    "coredns": ("coredns_priority_class_name", "coredns_autoscaler_priority_class_name"),
    "kube-dns": ("kube_dns_priority_class_name", "kube_dns_autoscaler_priority_class_name"),
}


@dataclass
class DNS:
    provider: str = ""
    options: dict[str, str] = field(default_factory=dict)
    upstreamnameservers: list[str] = field(default_factory=list)
    reversecidrs: list[str] = field(default_factory=list)
    stubdomains: dict[str, list[str]] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    nodelocal: NodeLocal | None = None
    update_strategy: dict[str, Any] = field(default_factory=dict)
    linear_autoscaler_params: LinearAutoscalerParams | None = None
    tolerations: list[Toleration] = field(default_factory=list)


@dataclass
class Ingress:
    provider: str = ""
    options: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    extra_args: dict[str, str] = field(default_factory=dict)
    dns_policy: str = ""
    extra_envs: list[dict[str, Any]] = field(default_factory=list)  # core/v1 EnvVar
    extra_volumes: list[dict[str, Any]] = field(default_factory=list)  # core/v1 Volume
    extra_volume_mounts: list[dict[str, Any]] = field(default_factory=list)  # core/v1 VolumeMount
    update_strategy: dict[str, Any] = field(default_factory=dict)
    http_port: int = 0
    https_port: int = 0
    network_mode: str = ""
    tolerations: list[Toleration] = field(default_factory=list)
    default_backend: bool | None = None
    default_http_backend_priority_class_name: str = ""
    nginx_ingress_controller_priority_class_name: str = ""
    default_ingress_class: bool | None = None


@dataclass
class Monitoring:
    provider: str = ""
    options: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    update_strategy: dict[str, Any] = field(default_factory=dict)
    replicas: int | None = None
    tolerations: list[Toleration] = field(default_factory=list)
    metrics_server_priority_class_name: str = ""


@dataclass
class CloudProvider:
    """`cloud_provider`: RKE spells these keys in camelCase; the provider sub-objects stay plain data and
    are checked by `validate_cloud.py` before any of them reaches a host."""

    name: str = ""
    useInstanceMetadataHostname: bool | None = None
    awsCloudProvider: dict[str, Any] | None = None
    azureCloudProvider: dict[str, Any] | None = None
    openstackCloudProvider: dict[str, Any] | None = None
    vsphereCloudProvider: dict[str, Any] | None = None
    harvesterCloudProvider: dict[str, Any] | None = None
    customCloudProvider: str = ""


@dataclass
class AuthWebhook:
    config_file: str = ""  # a kubeconfig naming the webhook; RKE's default points at 127.0.0.1:6440
    cache_timeout: str = ""


@dataclass
class Authentication:
    strategy: str = ""
    sans: list[str] = field(default_factory=list)
    webhook: AuthWebhook | None = None


@dataclass
class Authorization:
    mode: str = ""
    options: dict[str, str] = field(default_factory=dict)


@dataclass
class UpgradeStrategy:
    max_unavailable_worker: str = ""
    max_unavailable_controlplane: str = ""
    drain: bool | None = None
    node_drain_input: dict[str, Any] | None = None


@dataclass
class ClusterConfig:
    nodes: list[Node] = field(default_factory=list)
    cluster_name: str = ""
    kubernetes_version: str = ""
    ssh_key_path: str = ""
    ssh_cert_path: str = ""
    ssh_agent_auth: bool = False
    ignore_docker_version: bool | None = None
    bastion_host: BastionHost | None = None
    system_images: SystemImages = field(default_factory=SystemImages)
    private_registries: list[PrivateRegistry] = field(default_factory=list)
    services: Services = field(default_factory=Services)
    network: Network = field(default_factory=Network)
    authentication: Authentication = field(default_factory=Authentication)
    authorization: Authorization = field(default_factory=Authorization)
    upgrade_strategy: UpgradeStrategy = field(default_factory=UpgradeStrategy)
    prefix_path: str = ""
    addon_job_timeout: int = 0
    enable_cri_dockerd: bool | None = None
    dns: DNS = field(default_factory=DNS)
    ingress: Ingress = field(default_factory=Ingress)
    monitoring: Monitoring = field(default_factory=Monitoring)
    addons: str = ""
    addons_include: list[str] = field(default_factory=list)
    cloud_provider: CloudProvider = field(default_factory=CloudProvider)
    # RKE keys that drive operations rke-py does not implement yet; accepted and kept so a real file loads.
    restore: dict[str, Any] | None = None
    rotate_certificates: dict[str, Any] | None = None
    rotate_encryption_key: bool = False
    win_prefix_path: str = ""
    cri_dockerd_stream_server_address: str = ""
    cri_dockerd_stream_server_port: str = ""
    # Where each value came from: ("nodes", 0, "address") -> (line, col), 1-based. Filled by the loader.
    positions: dict[tuple[Any, ...], tuple[int, int]] = field(default_factory=dict, repr=False, compare=False)
    source: str = field(default="cluster.yml", repr=False, compare=False)
    # The EncryptionConfiguration this run deploys (plan/encryption.py), from the state and the file;
    # "" empties the file, None: no file.
    encryption_provider: str | None = field(default=None, repr=False, compare=False)

    def hosts(self, role: str) -> list[Node]:
        """Nodes with `role`, in file order (RKE keeps file order everywhere)."""
        return [n for n in self.nodes if n.has(role)]
