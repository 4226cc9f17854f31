"""Checks on a loaded, defaulted ClusterConfig: what RKE rejects (`rke:cluster/validation.go`) and more.

Every finding names the key it is about (its position comes from `config.positions`), says what is wrong
and how to fix it. rke-py is stricter than RKE in two places: it requires a controlplane and a worker node
(RKE only requires etcd), and it rejects `extra_args` keys written with leading dashes.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Callable

from rke_py.config import kdm
from rke_py.config.findings import Findings, Path, dotted
from rke_py.config.schema import ROLES, ClusterConfig, Node

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

NETWORK_PLUGINS = ("canal", "flannel", "calico", "weave", "aci", "none")
AUTH_STRATEGIES = ("x509", "webhook")
AUTHZ_MODES = ("rbac", "none")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
POD_SECURITY = ("", "privileged", "restricted")
SERVICE_KEYS = {
    "etcd": "etcd",
    "kube-api": "kube_api",
    "kube-controller": "kube_controller",
    "scheduler": "scheduler",
    "kubelet": "kubelet",
    "kubeproxy": "kubeproxy",
}
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_UNAVAILABLE = re.compile(r"^(\d+)(%?)$")
ROLE_EXAMPLE = {
    "etcd": '"role: [etcd, controlplane]" on 1, 3 or 5 nodes',
    "controlplane": '"role: [controlplane, etcd]" on at least one node',
    "worker": '"role: [worker]" on at least one node (or add worker to a controlplane node)',
}
REQUIRED_NODE_KEYS = {
    "address": 'add "address: <IP or DNS name the SSH client can reach>"',
    "user": 'add "user: <SSH user>", e.g. "user: ubuntu"',
    "role": 'add e.g. "role: [etcd, controlplane, worker]"',
}
SVC_RANGE = ("services", "kube-api", "service_cluster_ip_range")
CTRL_RANGE = ("services", "kube-controller", "service_cluster_ip_range")
CLUSTER_CIDR = ("services", "kube-controller", "cluster_cidr")
DNS_SERVER = ("services", "kubelet", "cluster_dns_server")
NODE_PORTS = ("services", "kube-api", "service_node_port_range")


def validate(config: ClusterConfig, findings: Findings) -> None:
    """Report every problem in `config` to `findings`."""
    for check in CHECKS:
        check(config, findings)


# --- nodes -------------------------------------------------------------------------------------------


def _nodes(config: ClusterConfig, findings: Findings) -> None:
    if not config.nodes:
        findings.error(
            ("nodes",),
            'no nodes: cluster.yml must list at least one node under "nodes"',
            'add a "nodes:" list (run "rke-py config" to write a starting file)',
        )
    for index, node in enumerate(config.nodes):
        _node(index, node, findings)


def _node(index: int, node: Node, findings: Findings) -> None:
    path: Path = ("nodes", index)
    label = _label(index, node)
    for key, hint in REQUIRED_NODE_KEYS.items():
        if not getattr(node, key):
            findings.error((*path, key), f"{label} has no {key}", hint)
    for position, role in enumerate(node.role):
        _role(role, (*path, "role", position), label, findings)
    _port(node.port, (*path, "port"), findings)
    _hostname(node, path, findings)
    for position, taint in enumerate(node.taints):
        _taint(taint.key, taint.effect, (*path, "taints", position), findings)


def _label(index: int, node: Node) -> str:
    return f"nodes[{index}] ({node.address})" if node.address else f"nodes[{index}]"


def _role(role: str, path: Path, label: str, findings: Findings) -> None:
    if role in ROLES:
        return
    hint = "a role is etcd, controlplane or worker" + _did_you_mean(role, ROLES)
    findings.error(path, f'unknown role "{role}" on {label}', hint)


def _port(port: str, path: Path, findings: Findings) -> None:
    if not (port.isdigit() and 1 <= int(port) <= 65535):
        findings.error(path, f'{dotted(path)} "{port}" is not a port number', "use a number from 1 to 65535")


def _hostname(node: Node, path: Path, findings: Findings) -> None:
    name = node.hostname_override
    if not name or (len(name) <= 253 and DNS1123_SUBDOMAIN.match(name)):
        return
    key = _name_key(path[1], findings)
    findings.error(
        (*path, key),
        f'node name "{name}" is not a valid Kubernetes node name (a DNS-1123 subdomain)',
        'use lowercase letters, digits, "-" and "."; start and end with a letter or digit'
        + ("" if key == "hostname_override" else '; set "hostname_override" to such a name'),
    )


def _taint(key: str, effect: str, path: Path, findings: Findings) -> None:
    if not key:
        findings.error(path, f"{dotted(path)} has no key", 'add "key: <taint key>"')
    if effect not in TAINT_EFFECTS:
        findings.error(
            (*path, "effect"),
            f'taint effect "{effect}" is not valid',
            "use NoSchedule, PreferNoSchedule or NoExecute" + _did_you_mean(effect, TAINT_EFFECTS),
        )


def _duplicates(config: ClusterConfig, findings: Findings) -> None:
    """Address is a node's identity for RKE; the hostname is its Kubernetes name. Both must be unique."""
    addresses = _repeats([node.address for node in config.nodes])
    for index, first in addresses.items():
        value = config.nodes[index].address
        hint = "each node needs its own address"
        _duplicate(("nodes", index, "address"), "address", value, first, findings, hint)
    names = _repeats([node.hostname_override for node in config.nodes])
    for index, first in names.items():
        if index not in addresses:  # the same address already explains the same default name
            value = config.nodes[index].hostname_override
            hint = "node names must be unique; hostname_override defaults to the address, lowercased"
            _duplicate(
                ("nodes", index, _name_key(index, findings)), "node name", value, first, findings, hint
            )


def _repeats(values: list[str]) -> dict[int, int]:
    """Index of each non-empty value seen before -> index where it was first seen."""
    first: dict[str, int] = {}
    repeats: dict[int, int] = {}
    for index, value in enumerate(values):
        if value and value in first:
            repeats[index] = first[value]
        first.setdefault(value, index)
    return repeats


def _name_key(index: int, findings: Findings) -> str:
    """The key a node's name comes from: hostname_override if the file sets it, else address."""
    return "hostname_override" if ("nodes", index, "hostname_override") in findings.positions else "address"


def _duplicate(path: Path, what: str, value: str, first: int, findings: Findings, hint: str) -> None:
    line = findings.where(("nodes", first))[0]
    findings.error(path, f'duplicate {what} "{value}": nodes[{first}] (line {line}) has it too', hint)


def _roles_present(config: ClusterConfig, findings: Findings) -> None:
    if not config.nodes:
        return
    external = bool(config.services.etcd.external_urls)
    for role in ROLES:
        if config.hosts(role) or (role == "etcd" and external):
            continue
        findings.error(("nodes",), f"no node has the {role} role", f"add {ROLE_EXAMPLE[role]}")


def _etcd_count(config: ClusterConfig, findings: Findings) -> None:
    count = len(config.hosts("etcd"))
    if count and count % 2 == 0:
        quorum = count // 2 + 1
        findings.warning(
            ("nodes",),
            f"{count} etcd nodes: quorum is {quorum}, so etcd survives {count - quorum} failure(s),"
            f" no more than with {count - 1}",
            "use an odd number of etcd nodes, 3 or 5",
        )


# --- etcd ----------------------------------------------------------------------------------------------


def _external_etcd(config: ClusterConfig, findings: Findings) -> None:
    etcd = config.services.etcd
    path = ("services", "etcd", "external_urls")
    if not etcd.external_urls:
        return
    members = [f"nodes[{i}]" for i, node in enumerate(config.nodes) if node.has("etcd")]
    if members:
        findings.error(
            path,
            "internal and external etcd cannot be mixed: external_urls is set and "
            f"{', '.join(members)} {'has' if len(members) == 1 else 'have'} the etcd role",
            "remove the etcd role from those nodes, or remove services.etcd.external_urls",
        )
    missing = [key for key in ("ca_cert", "cert", "key", "path") if not getattr(etcd, key)]
    if missing:
        findings.error(
            path,
            f"external etcd needs ca_cert, cert, key and path; missing: {', '.join(missing)}",
            "add the PEM text of the CA, client certificate and key, and the etcd path prefix (e.g. /)",
        )


# --- network ranges --------------------------------------------------------------------------------------


def _networks(text: str, path: Path, findings: Findings) -> list[Network] | None:
    """The network(s) of a CIDR, or of a comma-separated dual-stack pair; None (reported) if malformed."""
    try:
        return [ipaddress.ip_network(part.strip()) for part in text.split(",")]
    except ValueError as exc:
        reason = "has host bits set" if "host bits" in str(exc) else "is not a CIDR (NETWORK/BITS)"
        findings.error(path, f'{dotted(path)} "{text}" {reason}', _cidr_hint(text))
        return None


def _cidr_hint(text: str) -> str:
    try:
        return f"write the network address, {ipaddress.ip_network(text.split(',')[0].strip(), strict=False)}"
    except ValueError:
        return "write a network such as 10.43.0.0/16"


def _ranges(config: ClusterConfig, findings: Findings) -> None:
    api = config.services.kube_api.service_cluster_ip_range
    controller = config.services.kube_controller.service_cluster_ip_range
    services = _networks(api, SVC_RANGE, findings)
    if controller != api:
        findings.error(
            CTRL_RANGE,
            f'services.kube-controller.service_cluster_ip_range "{controller}" differs from'
            f' services.kube-api.service_cluster_ip_range "{api}"',
            "both must be the same range; set one and remove the other",
        )
    pods = _networks(config.services.kube_controller.cluster_cidr, CLUSTER_CIDR, findings)
    if services and pods:
        _overlap(services, pods, findings)
    if services:
        _dns_server(config.services.kubelet.cluster_dns_server, services, findings)


def _overlap(services: list[Network], pods: list[Network], findings: Findings) -> None:
    for svc in services:
        for pod in pods:
            if svc.version == pod.version and svc.overlaps(pod):
                path = CLUSTER_CIDR if CLUSTER_CIDR in findings.positions else SVC_RANGE
                findings.error(
                    path,
                    f"pod network {pod} (cluster_cidr) overlaps service network {svc}",
                    "pods and services need separate ranges, e.g. 10.42.0.0/16 and 10.43.0.0/16",
                )


def _dns_server(text: str, services: list[Network], findings: Findings) -> None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        findings.error(DNS_SERVER, f'{dotted(DNS_SERVER)} "{text}" is not an IP address', _dns_hint(services))
        return
    if not any(address in network for network in services if network.version == address.version):
        findings.error(
            DNS_SERVER,
            f"{dotted(DNS_SERVER)} {address} is outside the service network"
            f" {', '.join(str(n) for n in services)}",
            _dns_hint(services),
        )


def _dns_hint(services: list[Network]) -> str:
    return f"use an address in the service network, e.g. {services[0].network_address + 10}"


def _node_port_range(config: ClusterConfig, findings: Findings) -> None:
    text = config.services.kube_api.service_node_port_range
    match = re.fullmatch(r"(\d+)-(\d+)", text.strip())
    low, high = (int(match[1]), int(match[2])) if match else (0, 0)
    if not (match and 1 <= low < high <= 65535):
        findings.error(
            NODE_PORTS,
            f'{dotted(NODE_PORTS)} "{text}" is not a port range',
            "write FIRST-LAST with 1 <= FIRST < LAST <= 65535, e.g. 30000-32767",
        )


# --- services' extra_* ------------------------------------------------------------------------------------


def _extras(config: ClusterConfig, findings: Findings) -> None:
    for key, attribute in SERVICE_KEYS.items():
        service = getattr(config.services, attribute)
        base: Path = ("services", key)
        for prefix in ("", "win_"):
            _extra_args(getattr(service, f"{prefix}extra_args"), (*base, f"{prefix}extra_args"), findings)
            _extra_env(getattr(service, f"{prefix}extra_env"), (*base, f"{prefix}extra_env"), findings)
            _extra_binds(getattr(service, f"{prefix}extra_binds"), (*base, f"{prefix}extra_binds"), findings)


def _extra_args(args: dict[str, str], path: Path, findings: Findings) -> None:
    for flag in args:
        if flag.startswith("-"):
            findings.error(
                (*path, flag),
                f'{dotted(path)} key "{flag}" starts with "-"',
                f'write the flag name without dashes ("{flag.lstrip("-")}: ..."); rke-py adds "--"',
            )


def _extra_env(env: list[str], path: Path, findings: Findings) -> None:
    for index, entry in enumerate(env):
        if not re.match(r"^[^=\s]+=", entry):
            findings.error(
                (*path, index), f'{dotted(path)} entry "{entry}" is not KEY=value', 'e.g. "HTTP_PROXY=..."'
            )


def _extra_binds(binds: list[str], path: Path, findings: Findings) -> None:
    for index, entry in enumerate(binds):
        parts = entry.split(":")
        if len(parts) not in (2, 3) or not all(parts[:2]):
            findings.error(
                (*path, index),
                f'{dotted(path)} entry "{entry}" is not HOST_PATH:CONTAINER_PATH[:OPTIONS]',
                'e.g. "/var/lib/data:/data:z"',
            )


# --- cluster-wide settings --------------------------------------------------------------------------------


def _network_plugin(config: ClusterConfig, findings: Findings) -> None:
    plugin = config.network.plugin
    path = ("network", "plugin")
    if plugin not in NETWORK_PLUGINS:
        hint = f"use one of {', '.join(NETWORK_PLUGINS)}" + _did_you_mean(plugin, NETWORK_PLUGINS)
        findings.error(path, f'unknown network plugin "{plugin}"', hint)
    version = kdm.parse_version(config.kubernetes_version)
    if plugin == "weave" and version and version[:2] >= (1, 30):
        findings.error(
            path, "the weave network plugin is not supported for Kubernetes v1.30 and later", "use canal"
        )
    if plugin == "flannel" and config.network.mtu:
        findings.error(("network", "mtu"), "network.mtu cannot be set with the flannel plugin", "remove mtu")


def _authentication(config: ClusterConfig, findings: Findings) -> None:
    strategy = config.authentication.strategy
    parts = strategy.split("|")
    path = ("authentication", "strategy")
    unknown = [part for part in parts if part not in AUTH_STRATEGIES]
    if unknown or "x509" not in parts:
        findings.error(
            path,
            f'authentication strategy "{strategy}" is not supported',
            'use "x509" or "x509|webhook"; x509 is always required',
        )


def _authorization(config: ClusterConfig, findings: Findings) -> None:
    mode = config.authorization.mode
    if mode not in AUTHZ_MODES:
        hint = "use rbac or none" + _did_you_mean(mode, AUTHZ_MODES)
        findings.error(("authorization", "mode"), f'authorization mode "{mode}" is not supported', hint)
    pss = config.services.kube_api.pod_security_configuration
    if pss not in POD_SECURITY:
        findings.error(
            ("services", "kube-api", "pod_security_configuration"),
            f'pod_security_configuration "{pss}" is not supported',
            "use privileged or restricted",
        )


def _bastion(config: ClusterConfig, findings: Findings) -> None:
    bastion = config.bastion_host
    if bastion is None:
        return
    if not bastion.address:
        findings.error(
            ("bastion_host",), "bastion_host has a user but no address", 'add "address:" or remove it'
        )
    if not bastion.user:
        findings.error(("bastion_host",), "bastion_host has an address but no user", 'add "user: <SSH user>"')
    _port(bastion.port, ("bastion_host", "port"), findings)


def _version_and_images(config: ClusterConfig, findings: Findings) -> None:
    version = config.kubernetes_version
    path = ("kubernetes_version",)
    if kdm.parse_version(version) is None:
        example = f"v{version}" if kdm.parse_version(f"v{version}") else kdm.DEFAULT_K8S_VERSION
        findings.error(
            path, f'kubernetes_version "{version}" is not a version like vX.Y.Z', f'e.g. "{example}"'
        )
        return
    if kdm.system_images(version) is not None:
        return
    missing = [key for key in kdm.REQUIRED_IMAGES if not getattr(config.system_images, key)]
    if missing:
        findings.error(
            path,
            f"rke-py has no images for {version}; system_images must name {', '.join(missing)}",
            f"set those keys under system_images, or use one of {', '.join(kdm.versions())}",
        )


def _cri_dockerd(config: ClusterConfig, findings: Findings) -> None:
    version = kdm.parse_version(config.kubernetes_version)
    if version is None:
        return
    path = ("enable_cri_dockerd",)
    if config.enable_cri_dockerd is False and version[:2] >= (1, 24):
        findings.error(
            path,
            "enable_cri_dockerd is false, but Kubernetes v1.24 and later need cri-dockerd to use Docker",
            "remove enable_cri_dockerd (it defaults to true)",
        )
    if config.enable_cri_dockerd and version[:2] < (1, 21):
        findings.error(
            path, "enable_cri_dockerd needs Kubernetes v1.21 or later", "remove enable_cri_dockerd"
        )


def _registries(config: ClusterConfig, findings: Findings) -> None:
    defaults = [i for i, registry in enumerate(config.private_registries) if registry.is_default]
    for index in defaults[1:]:
        findings.error(
            ("private_registries", index, "is_default"),
            f"more than one private registry has is_default: true (also private_registries[{defaults[0]}])",
            "mark only the registry that holds the system images as is_default",
        )


def _upgrade_strategy(config: ClusterConfig, findings: Findings) -> None:
    strategy = config.upgrade_strategy
    for key in ("max_unavailable_worker", "max_unavailable_controlplane"):
        value = getattr(strategy, key)
        match = MAX_UNAVAILABLE.match(value)
        if not match or (match[2] and int(match[1]) > 100):
            findings.error(
                ("upgrade_strategy", key),
                f'upgrade_strategy.{key} "{value}" is not a count or a percentage',
                'write a whole number ("1") or a percentage up to 100% ("10%")',
            )


def _did_you_mean(word: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f' (did you mean "{close[0]}"?)' if close else ""


CHECKS: tuple[Callable[[ClusterConfig, Findings], None], ...] = (
    _nodes,
    _duplicates,
    _roles_present,
    _etcd_count,
    _external_etcd,
    _ranges,
    _node_port_range,
    _extras,
    _network_plugin,
    _authentication,
    _authorization,
    _bastion,
    _version_and_images,
    _cri_dockerd,
    _registries,
    _upgrade_strategy,
)
