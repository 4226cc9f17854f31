"""Checks on the cluster's address ranges: service and pod CIDRs, the DNS service address, node ports."""

from __future__ import annotations

import ipaddress
import re

from rke_py.config.findings import Findings, Path, dotted
from rke_py.config.schema import ClusterConfig

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

SVC_RANGE = ("services", "kube-api", "service_cluster_ip_range")
CTRL_RANGE = ("services", "kube-controller", "service_cluster_ip_range")
CLUSTER_CIDR = ("services", "kube-controller", "cluster_cidr")
DNS_SERVER = ("services", "kubelet", "cluster_dns_server")
NODE_PORTS = ("services", "kube-api", "service_node_port_range")


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
    if services and pods:
        _overlap(services, pods, written, findings)
    if services:
        _dns_server(config.services.kubelet.cluster_dns_server, services, findings)


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
