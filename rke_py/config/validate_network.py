"""Checks on the cluster's address ranges: service and pod CIDRs, the DNS service address, node ports."""

from __future__ import annotations

import ipaddress
import re

from rke_py.config import values
from rke_py.config.findings import Findings, Path, dotted
from rke_py.config.schema import ClusterConfig

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

SVC_RANGE = ("services", "kube-api", "service_cluster_ip_range")
CTRL_RANGE = ("services", "kube-controller", "service_cluster_ip_range")
CLUSTER_CIDR = ("services", "kube-controller", "cluster_cidr")
DNS_SERVER = ("services", "kubelet", "cluster_dns_server")
NODE_PORTS = ("services", "kube-api", "service_node_port_range")


MAX_SERVICE_HOST_BITS = 20  # kube-apiserver: "specified --service-cluster-ip-range is too large"
NODE_MASK = {4: 24, 6: 64}  # kube-controller-manager's default --node-cidr-mask-size per family
MAX_NODE_MASK_DIFF = 16  # kube-controller-manager: an IPv6 node mask at most 16 bits below the cluster's


def _networks(text: str, path: Path, findings: Findings) -> list[Network] | None:
    """The network(s) of a CIDR, or of a comma-separated dual-stack pair; None (reported) if malformed."""
    try:
        if not text.isascii():
            raise ValueError(text)
        networks = [ipaddress.ip_network(part.strip()) for part in text.split(",")]
    except ValueError as exc:
        reason = "has host bits set" if "host bits" in str(exc) else "is not a CIDR (NETWORK/BITS)"
        findings.error(path, f'{dotted(path)} "{text}" {reason}', _cidr_hint(text))
        return None
    families = sorted(network.version for network in networks)
    if families not in ([4], [6], [4, 6]):
        findings.error(
            path,
            f'{dotted(path)} "{text}" is not one range or a dual-stack pair (one IPv4 and one IPv6 range)',
            "write one CIDR, or an IPv4 and an IPv6 CIDR separated by a comma",
        )
        return None
    return networks


def _cidr_hint(text: str) -> str:
    try:
        return f"write the network address, {ipaddress.ip_network(text.split(',')[0].strip(), strict=False)}"
    except ValueError:
        return "write a network such as 10.43.0.0/16"


def ranges(config: ClusterConfig, findings: Findings) -> None:
    api = config.services.kube_api.service_cluster_ip_range
    controller = config.services.kube_controller.service_cluster_ip_range
    # When only kube-controller's range is written, kube-api's was copied from it: point at the written one.
    written = (
        SVC_RANGE if SVC_RANGE in findings.positions or CTRL_RANGE not in findings.positions else CTRL_RANGE
    )
    services = _networks(api, written, findings)
    if controller != api:
        findings.error(
            CTRL_RANGE,
            f'services.kube-controller.service_cluster_ip_range "{controller}" differs from'
            f' services.kube-api.service_cluster_ip_range "{api}"',
            "both must be the same range; set one and remove the other",
        )
    pods = _networks(config.services.kube_controller.cluster_cidr, CLUSTER_CIDR, findings)
    if services and _service_sizes(services, written, findings):
        _dns_server(config.services.kubelet.cluster_dns_server, services, findings)
    if pods:
        _pod_sizes(pods, config.services.kube_controller.extra_args, findings)
    if services and pods:
        _overlap(services, pods, written, findings)


def _service_sizes(services: list[Network], path: Path, findings: Findings) -> bool:
    """True when every range has a size kube-apiserver takes."""
    fits = True
    for network in services:
        host_bits = network.max_prefixlen - network.prefixlen
        if host_bits > MAX_SERVICE_HOST_BITS:
            smallest = network.max_prefixlen - MAX_SERVICE_HOST_BITS
            findings.error(
                path,
                f"service network {network} is larger than kube-apiserver accepts (at most /{smallest})",
                f"use a /{smallest} or smaller range, e.g. {_example(network, smallest)}",
            )
        elif host_bits < 2:
            findings.error(
                path,
                f"service network {network} is too small for the kubernetes and DNS service addresses",
                "use a range such as 10.43.0.0/16",
            )
        fits = fits and 2 <= host_bits <= MAX_SERVICE_HOST_BITS
    return fits


def _example(network: Network, prefix: int) -> str:
    return str(ipaddress.ip_network((network.network_address, prefix), strict=False))


def _pod_sizes(pods: list[Network], extra_args: dict[str, str], findings: Findings) -> None:
    """Each node gets a /24 (IPv4) or /64 (IPv6) of the pod network, unless kube-controller's flags say so."""
    for network in pods:
        mask = _node_mask(network.version, extra_args)
        if network.prefixlen > mask:
            findings.error(
                CLUSTER_CIDR,
                f"pod network {network} is smaller than one node's share (/{mask})",
                f"use a larger range, e.g. {_example(network, 16 if network.version == 4 else 48)}",
            )
        elif network.version == 6 and mask - network.prefixlen > MAX_NODE_MASK_DIFF:
            findings.error(
                CLUSTER_CIDR,
                f"pod network {network} is too large for /{mask} node ranges (kube-controller-manager allows"
                f" at most {MAX_NODE_MASK_DIFF} bits between them)",
                f"use a /{mask - MAX_NODE_MASK_DIFF} or smaller IPv6 range",
            )


def _node_mask(version: int, extra_args: dict[str, str]) -> int:
    for flag in (f"node-cidr-mask-size-ipv{version}", "node-cidr-mask-size"):
        value = extra_args.get(flag, "")
        if value.isascii() and value.isdigit() and len(value) < 4:
            return int(value)
    return NODE_MASK[version]


def _overlap(services: list[Network], pods: list[Network], service_path: Path, findings: Findings) -> None:
    for svc in services:
        for pod in pods:
            if svc.version == pod.version and svc.overlaps(pod):
                path = CLUSTER_CIDR if CLUSTER_CIDR in findings.positions else service_path
                findings.error(
                    path,
                    f"pod network {pod} (cluster_cidr) overlaps service network {svc}",
                    "pods and services need separate ranges, e.g. 10.42.0.0/16 and 10.43.0.0/16",
                )


def _dns_server(text: str, services: list[Network], findings: Findings) -> None:
    address = values.ip(text)
    if address is None:
        findings.error(DNS_SERVER, f'{dotted(DNS_SERVER)} "{text}" is not an IP address', _dns_hint(services))
        return
    network = next((n for n in services if n.version == address.version and address in n), None)
    if network is None:
        findings.error(
            DNS_SERVER,
            f"{dotted(DNS_SERVER)} {address} is outside the service network"
            f" {', '.join(str(n) for n in services)}",
            _dns_hint(services),
        )
        return
    reserved = {
        network.network_address: "the service network's own address",
        network.network_address + 1: "the kubernetes service's address",
    }
    if network.version == 4:
        reserved[network.broadcast_address] = "the service network's broadcast address"
    if address in reserved:
        findings.error(
            DNS_SERVER, f"{dotted(DNS_SERVER)} {address} is {reserved[address]}", _dns_hint(services)
        )


def _dns_hint(services: list[Network]) -> str:
    return f"use an address in the service network, e.g. {services[0].network_address + 10}"


def node_port_range(config: ClusterConfig, findings: Findings) -> None:
    text = config.services.kube_api.service_node_port_range
    match = re.fullmatch(r"(\d+)-(\d+)", text.strip())
    low, high = (int(match[1]), int(match[2])) if match else (0, 0)
    if not (match and 1 <= low < high <= 65535):
        findings.error(
            NODE_PORTS,
            f'{dotted(NODE_PORTS)} "{text}" is not a port range',
            "write FIRST-LAST with 1 <= FIRST < LAST <= 65535, e.g. 30000-32767",
        )
