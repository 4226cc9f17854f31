"""No silent drops: every key of RKE's cluster.yml either changes what rke-py does or is named at its line.

Each key of `tests/fixtures/config/rke_keys.txt` (RKE's own list) is changed, one at a time, in RKE's full
`cluster.yml` (`rke_config_full.yml`, what `rke config` writes). The change passes when rke-py warns or
refuses at the key's lines, or when what rke-py would do differs: the plan of every node (containers and
files), the certificates' names, the cluster objects (RBAC, add-ons, Node labels and taints), and what the
run takes from cluster.yml (SSH targets, the rolling batches with their cordon and drain, the admin
kubeconfig, pull credentials, preflight). A key that does none of these is dropped silently, and fails.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import cache
from operator import attrgetter
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from rke_py.addons import build as build_addons
from rke_py.config import load_text
from rke_py.config.schema import ClusterConfig
from rke_py.deploy import actions, rolling, snapshot
from rke_py.deploy.facts import HostFacts
from rke_py.deploy.nodesync import node_patch
from rke_py.deploy.preflight import preflight
from rke_py.deploy.targets import bastion_target, ssh_target
from rke_py.errors import ConfigError, Problem
from rke_py.pki.bundle import Bundle, build_bundle
from rke_py.pki.kubeconfig import admin_kubeconfig
from rke_py.plan import build_plan, encryption
from rke_py.plan.model import ContainerSpec
from rke_py.plan.rbac import rbac_objects
from rke_py.plan.registries import registry_auth
from tests.unit.test_plan_fixtures import describe

CONFIG = Path(__file__).parents[1] / "fixtures" / "config"
BASE_TEXT = (CONFIG / "rke_config_full.yml").read_text()
KEYS = [
    tuple(line.split())
    for line in (CONFIG / "rke_keys.txt").read_text().splitlines()
    if line and not line.startswith("#")
]

STATE_KEY = encryption.key_file([("key-state", "MDEyMzQ1Njc4OUFCQ0RFRjAxMjM0NTY3ODlBQkNERUY=")])
NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)
OLD = "v1.28.15-rancher1-1"  # a version that still carries the in-tree cloud providers RKE 1.6 writes
CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
WORKERS = {"nodes[3]": {"address": "192.0.2.14", "user": "ubuntu", "role": ["worker"]}} | {
    "nodes[4]": {"address": "192.0.2.15", "user": "ubuntu", "role": ["worker"]}
}
REGISTRY = {"private_registries": [{"url": "registry.example.com", "user": "puller", "password": "secret"}]}
S3 = {"services.etcd.backup_config": {"enabled": True, "s3backupconfig": {"bucket_name": "snapshots"}}}
BASTION = {"bastion_host": {"address": "192.0.2.100", "user": "jump"}}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}
UPDATE = {"strategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}


@dataclass(frozen=True)
class Change:
    """Set `path` to `value`, on top of `setup` (applied to both sides, so only `path` differs)."""

    path: str
    value: Any
    setup: dict[str, Any] = field(default_factory=dict)


def services(name: str) -> list[Change]:
    """The keys every service has (RKE's BaseService)."""
    base = f"services.{name}"
    return [
        Change(f"{base}.image", "registry.example.com/rancher/hyperkube:v1.30.4-rancher1"),
        Change(f"{base}.extra_args", {"v": "4"}),
        Change(f"{base}.extra_args_array", {"v": ["4"]}),
        Change(f"{base}.extra_binds", ["/opt/extra:/opt/extra"]),
        Change(f"{base}.extra_env", ["EXTRA=1"]),
        Change(f"{base}.win_extra_args", {"v": "4"}),
        Change(f"{base}.win_extra_args_array", {"v": ["4"]}),
        Change(f"{base}.win_extra_binds", ["c:\\opt:c:\\opt"]),
        Change(f"{base}.win_extra_env", ["EXTRA=1"]),
    ]


def addon_common(base: str, setup: dict[str, Any] | None = None) -> list[Change]:
    setup = setup or {}
    return [
        Change(f"{base}.node_selector", {"infra": "true"}, setup),
        Change(f"{base}.update_strategy", UPDATE, setup),
        Change(f"{base}.tolerations", [TOLERATION], setup),
    ]


CHANGES: list[Change] = [
    # nodes
    Change("nodes[0].nodeName", "node-a"),
    Change("nodes[0].address", "192.0.2.21"),
    Change("nodes[0].port", "2222"),
    Change("nodes[0].internal_address", "10.0.0.11"),
    Change("nodes[0].role", ["etcd", "controlplane"]),
    Change("nodes[0].hostname_override", "node-a"),
    Change("nodes[0].user", "rancher"),
    Change("nodes[0].docker_socket", "/run/user/1000/docker.sock"),
    Change("nodes[0].ssh_agent_auth", True),
    Change("nodes[0].ssh_key", "not a key, but given inline"),
    Change("nodes[0].ssh_key_path", "~/.ssh/other_key"),
    Change("nodes[0].ssh_cert", "ssh-rsa-cert-v01@openssh.com AAAA"),
    Change("nodes[0].ssh_cert_path", "~/.ssh/id_rsa-cert.pub"),
    Change("nodes[0].labels", {"zone": "a"}),
    Change("nodes[0].taints", [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]),
    Change("nodes[0].taints[0].timeAdded", "2024-01-01T00:00:00Z", {"nodes[0].taints": [TOLERATION | {}]}),
    # services
    *services("etcd"),
    Change("services.etcd.external_urls", ["https://192.0.2.50:2379"]),
    Change("services.etcd.ca_cert", CERT),
    Change("services.etcd.cert", CERT),
    Change("services.etcd.key", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n"),
    Change("services.etcd.path", "/etcd"),
    Change("services.etcd.uid", 52034, {"services.etcd.gid": 52034}),
    Change("services.etcd.gid", 52034, {"services.etcd.uid": 52034}),
    Change("services.etcd.snapshot", False),
    Change("services.etcd.retention", "48h"),
    Change("services.etcd.creation", "6h"),
    Change("services.etcd.backup_config.enabled", False, {"services.etcd.backup_config": {"enabled": True}}),
    Change("services.etcd.backup_config.interval_hours", 6),
    Change("services.etcd.backup_config.retention", 12),
    Change("services.etcd.backup_config.s3backupconfig.access_key", "AKIAEXAMPLE", S3),
    Change("services.etcd.backup_config.s3backupconfig.secret_key", "example-secret", S3),
    Change("services.etcd.backup_config.s3backupconfig.bucket_name", "other", S3),
    Change("services.etcd.backup_config.s3backupconfig.region", "eu-west-1", S3),
    Change("services.etcd.backup_config.s3backupconfig.endpoint", "s3.example.com", S3),
    Change("services.etcd.backup_config.s3backupconfig.custom_ca", CERT, S3),
    Change("services.etcd.backup_config.s3backupconfig.folder", "cluster-a", S3),
    Change("services.etcd.backup_config.safe_timestamp", True),
    Change("services.etcd.backup_config.timeout", 600),
    *services("kube-api"),
    Change("services.kube-api.service_cluster_ip_range", "10.44.0.0/16"),
    Change("services.kube-api.service_node_port_range", "30000-31000"),
    Change("services.kube-api.pod_security_configuration", "restricted"),
    Change("services.kube-api.always_pull_images", True),
    Change("services.kube-api.secrets_encryption_config.enabled", True),
    Change(
        "services.kube-api.secrets_encryption_config.custom_config",
        {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "EncryptionConfiguration",
            "resources": [{"resources": ["secrets"], "providers": [{"identity": {}}]}],
        },
        {"services.kube-api.secrets_encryption_config.enabled": True},
    ),
    Change("services.kube-api.audit_log.enabled", False),
    Change("services.kube-api.audit_log.configuration.max_age", 7),
    Change("services.kube-api.audit_log.configuration.max_backup", 3),
    Change("services.kube-api.audit_log.configuration.max_size", 50),
    Change("services.kube-api.audit_log.configuration.path", "/var/log/kube-audit/other.json"),
    Change("services.kube-api.audit_log.configuration.format", "legacy"),
    Change(
        "services.kube-api.audit_log.configuration.policy",
        {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "RequestResponse"}]},
    ),
    Change(
        "services.kube-api.admission_configuration",
        {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration", "plugins": []},
    ),
    Change("services.kube-api.event_rate_limit.enabled", True),
    Change(
        "services.kube-api.event_rate_limit.configuration",
        {
            "apiVersion": "eventratelimit.admission.k8s.io/v1alpha1",
            "kind": "Configuration",
            "limits": [{"type": "Server", "qps": 100, "burst": 200}],
        },
        {"services.kube-api.event_rate_limit.enabled": True},
    ),
    *services("kube-controller"),
    Change("services.kube-controller.cluster_cidr", "10.45.0.0/16"),
    Change("services.kube-controller.service_cluster_ip_range", "10.44.0.0/16"),
    *services("scheduler"),
    *services("kubelet"),
    Change("services.kubelet.cluster_domain", "cluster.example"),
    Change("services.kubelet.infra_container_image", "registry.example.com/pause:3.9"),
    Change("services.kubelet.cluster_dns_server", "10.43.0.53"),
    Change("services.kubelet.fail_swap_on", True),
    Change("services.kubelet.generate_serving_certificate", True),
    *services("kubeproxy"),
    # network
    Change("network.plugin", "flannel"),
    Change("network.options", {"canal_flannel_backend_type": "host-gw"}),
    Change("network.mtu", 1400),
    Change("network.calico_network_provider.cloudprovider", "aws", {"network.plugin": "calico"}),
    Change("network.canal_network_provider.iface", "eth1"),
    Change("network.flannel_network_provider.iface", "eth1", {"network.plugin": "flannel"}),
    Change("network.weave_network_provider.password", "weave-secret"),
    *addon_common("network"),
    Change("network.enable_br_netfilter", True),
    # authentication and authorization
    Change("authentication.strategy", "x509|webhook"),
    Change("authentication.sans", ["api.example.com"]),
    Change("authentication.webhook.config_file", "apiVersion: v1\nkind: Config\nclusters: []\n"),
    Change("authentication.webhook.cache_timeout", "30s", {"authentication.strategy": "x509|webhook"}),
    Change("authorization.mode", "none"),
    Change("authorization.options", {"x": "y"}),
    # add-ons given by the user
    Change("addons", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n"),
    Change("addons_include", [str(Path(__file__).parents[2] / "addons" / "kubernetes-dashboard.yaml")]),
    # cluster-wide SSH and run settings
    Change("ssh_key_path", "~/.ssh/other_key", {"nodes[0].ssh_key_path": ""}),
    Change("ssh_cert_path", "~/.ssh/id_rsa-cert.pub"),
    Change("ssh_agent_auth", True),
    Change("ignore_docker_version", True),
    Change("enable_cri_dockerd", False),
    Change("kubernetes_version", "v1.29.8-rancher1-1"),
    Change("cluster_name", "production"),
    Change("prefix_path", "/opt/rke"),
    Change("win_prefix_path", "c:\\rke"),
    Change("addon_job_timeout", 90),
    Change("cri_dockerd_stream_server_address", "0.0.0.0"),
    Change("cri_dockerd_stream_server_port", "10011"),
    Change("rotate_encryption_key", True),
    Change("restore.restore", True, {"restore.snapshot_name": "before-upgrade"}),
    Change("restore.snapshot_name", "before-upgrade", {"restore.restore": True}),
    Change("rotate_certificates.cacertificates", True),
    Change("rotate_certificates.services", ["kubelet"]),
    # private registries
    Change("private_registries[0].url", "other.example.com", REGISTRY),
    Change("private_registries[0].user", "other", REGISTRY),
    Change("private_registries[0].password", "other", REGISTRY),
    Change("private_registries[0].is_default", True, REGISTRY),
    *[
        Change(
            f"private_registries[0].ecr_credential_plugin.{key}",
            "example",
            REGISTRY | {"private_registries[0].url": "123456789012.dkr.ecr.eu-west-1.amazonaws.com"},
        )
        for key in ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
    ],
    # ingress
    Change("ingress.provider", "none"),
    Change("ingress.options", {"use-forwarded-headers": "true"}),
    Change("ingress.extra_args", {"enable-ssl-passthrough": ""}),
    Change("ingress.dns_policy", "ClusterFirstWithHostNet"),
    Change("ingress.extra_envs", [{"name": "TZ", "value": "UTC"}]),
    Change("ingress.extra_volumes", [{"name": "extra", "hostPath": {"path": "/opt/extra"}}]),
    Change("ingress.extra_volume_mounts", [{"name": "extra", "mountPath": "/extra"}]),
    Change("ingress.http_port", 8080),
    Change("ingress.https_port", 8443),
    Change("ingress.network_mode", "hostNetwork"),
    Change("ingress.default_backend", True),
    Change(
        "ingress.default_http_backend_priority_class_name",
        "infra-critical",
        {"ingress.default_backend": True},
    ),
    Change("ingress.nginx_ingress_controller_priority_class_name", "infra-critical"),
    Change("ingress.default_ingress_class", False),
    *addon_common("ingress"),
    # bastion
    Change("bastion_host.address", "192.0.2.101", BASTION),
    Change("bastion_host.port", "2222", BASTION),
    Change("bastion_host.user", "other", BASTION),
    Change("bastion_host.ssh_agent_auth", True, BASTION),
    Change("bastion_host.ssh_key", "not a key, but given inline", BASTION),
    Change("bastion_host.ssh_key_path", "~/.ssh/bastion_key", BASTION),
    Change("bastion_host.ssh_cert", "ssh-rsa-cert-v01@openssh.com AAAA", BASTION),
    Change("bastion_host.ssh_cert_path", "~/.ssh/bastion-cert.pub", BASTION),
    Change("bastion_host.ignore_proxy_env_vars", True, BASTION),
    # monitoring
    Change("monitoring.provider", "none"),
    Change("monitoring.options", {"kubelet-preferred-address-types": "InternalIP"}),
    Change("monitoring.replicas", 2),
    Change("monitoring.metrics_server_priority_class_name", "infra-critical"),
    *addon_common("monitoring"),
    # dns
    Change("dns.provider", "kube-dns"),
    Change("dns.options", {"x": "y"}),
    Change("dns.upstreamnameservers", ["192.0.2.53"]),
    Change("dns.reversecidrs", ["192.0.2.0/24"]),
    Change("dns.stubdomains", {"corp.example": ["192.0.2.53"]}),
    Change("dns.nodelocal.ip_address", "169.254.20.10"),
    *addon_common("dns.nodelocal", {"dns.nodelocal.ip_address": "169.254.20.10"})[::2],
    Change(
        "dns.nodelocal.node_local_dns_priority_class_name",
        "infra-critical",
        {"dns.nodelocal.ip_address": "169.254.20.10"},
    ),
    Change("dns.nodelocal.update_strategy", UPDATE, {"dns.nodelocal.ip_address": "169.254.20.10"}),
    *addon_common("dns"),
    Change("dns.linear_autoscaler_params.cores_per_replica", 64.0),
    Change("dns.linear_autoscaler_params.nodes_per_replica", 8.0),
    Change("dns.linear_autoscaler_params.min", 2),
    Change("dns.linear_autoscaler_params.max", 5),
    Change("dns.linear_autoscaler_params.prevent_single_point_failure", False),
    # upgrades
    Change("upgrade_strategy.max_unavailable_worker", "2", WORKERS),
    Change("upgrade_strategy.max_unavailable_controlplane", "2"),
    Change("upgrade_strategy.drain", True),
    *[
        Change(f"upgrade_strategy.node_drain_input.{key}", value, {"upgrade_strategy.drain": True})
        for key, value in (
            ("force", True),
            ("ignore_daemonsets", False),
            ("delete_local_data", True),
            ("grace_period", 30),
            ("timeout", 300),
        )
    ],
]

# Cloud providers: each field of each provider, on a version that still has it in-tree.
CLOUD_VALUES = {"bool": True, "number": 3, "list": ["dc1"], "map": {"a": "b"}}
VCENTER = "vcenter1"
CLOUD_SETUP = {
    "vsphereCloudProvider": {
        "cloud_provider.vsphereCloudProvider": {
            "virtual_center": {VCENTER: {"user": "u", "password": "p", "datacenters": "dc1"}},
            "workspace": {"server": VCENTER, "datacenter": "dc1", "folder": "k8s", "default-datastore": "ds"},
        }
    },
    "azureCloudProvider": {"cloud_provider.azureCloudProvider": {"tenantId": "t", "subscriptionId": "s"}},
    "openstackCloudProvider": {
        "cloud_provider.name": "external",
        "cloud_provider.openstackCloudProvider": {"global": {"auth-url": "https://k"}},
    },
    "awsCloudProvider": {"cloud_provider.name": "external-aws"},
    "harvesterCloudProvider": {},
}


KUBE_DNS = {"dns.provider": "kube-dns"}
NODELOCAL = {"dns.nodelocal.ip_address": "169.254.20.10"}
FLANNEL = {"network.plugin": "flannel"}
CALICO = {"network.plugin": "calico"}
# The images of add-ons and containers the base file does not run, with the setup that runs them.
IMAGE_SETUP: dict[str, dict[str, Any]] = {
    "nginx_proxy": WORKERS,
    "kubedns": KUBE_DNS,
    "dnsmasq": KUBE_DNS,
    "kubedns_sidecar": KUBE_DNS,
    "kubedns_autoscaler": KUBE_DNS,
    "nodelocal": NODELOCAL,
    "flannel": FLANNEL,
    "flannel_cni": FLANNEL,
    "calico_node": CALICO,
    "calico_cni": CALICO,
    "calico_controllers": CALICO,
    "calico_ctl": CALICO,
    "calico_flexvol": CALICO,
    "ingress_backend": {"ingress.default_backend": True},
}


def cloud_changes() -> list[Change]:
    changes = []
    for path, kind in KEYS:
        parts = path.split(".")
        if parts[0] != "cloud_provider" or len(parts) < 3:
            continue
        setup = {"kubernetes_version": OLD} | CLOUD_SETUP[parts[1]]
        value = CLOUD_VALUES.get(kind, f"x-{parts[-1]}")
        changes.append(Change(path.replace("*", VCENTER if "vsphere" in path else "ec2"), value, setup))
    return changes


CHANGES += [
    Change("cloud_provider.name", "external"),
    Change("cloud_provider.useInstanceMetadataHostname", True, {"cloud_provider.name": "external-aws"}),
    Change(
        "cloud_provider.customCloudProvider",
        "[Global]\nzone = a\n",
    ),
    *cloud_changes(),
    # Keys of things rke-py does not run (ACI, Weave, Windows); changing any must be named at its line.
    *[
        Change(path, CLOUD_VALUES.get(kind, "x"))
        for path, kind in KEYS
        if path.startswith("network.aci_network_provider.")
    ],
    *[
        Change(
            path, f"registry.example.com/{path.rsplit('.', 1)[-1]}:1", IMAGE_SETUP.get(path.split(".")[1], {})
        )
        for path, _ in KEYS
        if path.startswith("system_images.")
    ],
]


# --- applying a change ----------------------------------------------------------------------------------

STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def steps(path: str) -> list[str | int]:
    return [int(index) if index else name for name, index in STEP.findall(path)]


def put(document: Any, path: str, value: Any) -> None:
    """Set `path` in a round-trip document, making the mappings and list items on the way."""
    *parents, last = steps(path)
    here = document
    for step, following in zip(parents, [*parents[1:], last][: len(parents)], strict=True):
        empty = CommentedSeq() if isinstance(following, int) else CommentedMap()
        if isinstance(step, int):
            while len(here) <= step:
                here.append(copy.deepcopy(empty))
        elif here.get(step) is None:
            here[step] = empty
        here = here[step]
    if isinstance(last, int):
        while len(here) <= last:
            here.append(None)
    here[last] = copy.deepcopy(value)


def render(change: Change | None, setup: dict[str, Any]) -> str:
    yaml = YAML()
    document = yaml.load(BASE_TEXT)
    for path, value in setup.items():
        put(document, path, value)
    if change is not None:
        put(document, change.path, change.value)
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()


def key_lines(text: str, path: str) -> set[int]:
    """The 1-based lines the key at `path` and everything under it take, and the key lines of the blocks it
    is in (where a message about such a block stands)."""
    document = YAML().load(text)
    *parents, last = steps(path)
    here, ancestors = document, []
    for step in parents:
        here, ancestors = here[step], [*ancestors, (here, step)]
    line = (here.lc.item(last) if isinstance(last, int) else here.lc.key(last))[0] + 1
    lines = {line}
    for container, step in ancestors:
        if not isinstance(step, int):
            lines.add(container.lc.key(step)[0] + 1)

    def walk(node: Any) -> None:
        if isinstance(node, CommentedMap):
            for key, child in node.items():
                lines.add(node.lc.key(key)[0] + 1)
                walk(child)
        elif isinstance(node, CommentedSeq):
            for index, child in enumerate(node):
                lines.add(node.lc.item(index)[0] + 1)
                walk(child)
        elif isinstance(node, str) and "\n" in node:
            lines.update(range(line, line + node.count("\n") + 1))

    walk(here[last])
    return lines


# --- what rke-py does with a cluster.yml --------------------------------------------------------------


@cache
def base_bundle() -> Bundle:
    return build_bundle(load_text(BASE_TEXT).config)


def rolling_batches(config: ClusterConfig) -> list[Any]:
    """Every host replaced in each plane: the batches, and what is done to their Nodes around them."""
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}, "spec": {}}
    registered = {n.name: ready for n in config.nodes}
    out = []
    for plane in ("control", "worker"):
        host_actions: dict[str, list[actions.HostAction]] = {
            n.address: [actions.ReplaceContainer(ContainerSpec(name="kubelet", image="x"), plane)]
            for n in config.nodes
        }
        for batch in rolling.schedule(config, plane, config.nodes, host_actions, registered):
            before = [(x.describe(), getattr(x, "options", None)) for x in batch.before]
            out.append([plane, [n.address for n in batch.nodes], before])
    return out


def outcome(text: str) -> dict[str, Any]:
    config = load_text(text).config
    # as `prepare` sets it, with the key a running cluster's state would hold
    config.encryption_provider = encryption.desired_file(config, STATE_KEY, STATE_KEY)
    bundle = build_bundle(config, copy.deepcopy(base_bundle()))
    plan = build_plan(config, bundle)
    old_docker = HostFacts(address="", docker_version="19.03.0")
    return json.loads(
        json.dumps(
            {
                "plan": describe(plan),
                "file_contents": [
                    {f.path: hashlib.sha256(f.content).hexdigest() for f in n.files} for n in plan.nodes
                ],
                "certificates": {
                    name: [pair.common_name, sorted(map(str, set.union(*pair.sans())))]
                    for name, pair in bundle.items()
                },
                "rbac": rbac_objects(config),
                "addons": [[a.name, a.objects, a.critical] for a in build_addons(config, CONFIG.parent)],
                "nodes": [node_patch(n, {}) for n in config.nodes],
                "ssh": [asdict(ssh_target(n, config)) for n in config.nodes],
                "bastion": asdict(target) if (target := bastion_target(config)) else None,
                "rolling": rolling_batches(config),
                "kubeconfig": admin_kubeconfig(config, bundle, "https://192.0.2.11:6443"),
                "pulls": registry_auth(config),
                "preflight": str(preflight(config, config.nodes[0], old_docker)),
                "snapshots": [snapshot.default_snapshot_name(config, NOW), snapshot.timeout(config)],
            },
            default=str,
        )
    )


# Read by the run itself, with no function of their own the audit could call: the module and what it reads.
READ_BY = {
    "nodes[0].docker_socket": ("deploy/session.py", "node.docker_socket"),
    "addon_job_timeout": ("deploy/up.py", "config.addon_job_timeout"),
    "system_images.cert_downloader": ("deploy/session.py", "config.system_images.cert_downloader"),
}


def read_by_the_run(change: Change, text: str) -> bool:
    module, expression = READ_BY[change.path]
    source = (Path(__file__).parents[2] / "rke_py" / module).read_text()
    config = load_text(text).config
    root, attributes = expression.split(".", 1)
    value = attrgetter(attributes)({"config": config, "node": config.nodes[0]}[root])
    return expression in source and value == change.value


def problems(text: str) -> tuple[list[Problem], bool]:
    """Warnings, or the errors (True) of a refused file."""
    try:
        return load_text(text).warnings, False
    except ConfigError as exc:
        return exc.problems, True


@cache
def before(setup_json: str) -> tuple[list[str], dict[str, Any]]:
    text = render(None, json.loads(setup_json))
    found, refused = problems(text)
    assert not refused, f"the setup alone is refused: {[str(p) for p in found]}"
    return [str(p) for p in found], outcome(text)


def test_every_key_of_rkes_cluster_yml_is_changed_by_the_audit():
    covered = {re.sub(r"\[\d+\]", "[]", c.path) for c in CHANGES}
    covered |= {re.sub(r"(virtual_center|service_override)\.[^.]+", r"\1.*", p) for p in covered}
    missing = [
        path for path, _ in KEYS if path not in covered and not any(p.startswith(path + ".") for p in covered)
    ]
    missing = [path for path in missing if not any(path.startswith(p + "[].") for p in covered)]
    assert missing == []


@pytest.mark.parametrize("change", CHANGES, ids=[c.path for c in CHANGES])
def test_a_changed_key_is_acted_on_or_named_at_its_line(change: Change):
    known, was = before(json.dumps(change.setup, sort_keys=True))
    changed = render(change, change.setup)
    lines = key_lines(changed, change.path)
    found, refused = problems(changed)
    named = [p for p in found if (p.line in lines or change.path in p.message) and str(p) not in known]
    if named:
        assert all(p.line for p in named)
        return
    assert not refused, f"refused, but not at the key's lines {sorted(lines)}: {[str(p) for p in found]}"
    if change.path in READ_BY:
        assert read_by_the_run(change, changed)
        return
    assert outcome(changed) != was, f"{change.path}: neither acted on nor named at line {min(lines)}"
