"""Where and how to reach each host: cluster.yml's SSH settings become transport targets here, so the
transport (`rke_py.hosts`) never reads the cluster model."""

from __future__ import annotations

from rke_py.config.schema import ClusterConfig, Node
from rke_py.errors import ConnectError
from rke_py.hosts.ssh import SSHTarget


def _port(value: str, label: str) -> int:
    try:
        port = int(value or "22")
    except ValueError:
        raise ConnectError(label, "ssh", f"port {value!r} is not a number") from None
    if not 0 < port < 65536:
        raise ConnectError(label, "ssh", f"port {port} is out of range")
    return port


def ssh_target(node: Node, config: ClusterConfig) -> SSHTarget:
    """The SSH target of a node; empty key settings fall back to the cluster's, as in RKE."""
    return SSHTarget(
        address=node.address,
        port=_port(node.port, node.name),
        user=node.user,
        ssh_key=node.ssh_key,
        ssh_key_path="" if node.ssh_key else (node.ssh_key_path or config.ssh_key_path),
        ssh_cert=node.ssh_cert,
        ssh_cert_path="" if node.ssh_cert else (node.ssh_cert_path or config.ssh_cert_path),
        ssh_agent_auth=node.ssh_agent_auth or config.ssh_agent_auth,
        name=node.address,  # every rke-py message names a node by its cluster.yml address
    )


def bastion_target(config: ClusterConfig) -> SSHTarget | None:
    """The bastion's SSH target, or None when cluster.yml has no `bastion_host`."""
    b = config.bastion_host
    if b is None or not b.address:
        return None
    return SSHTarget(
        address=b.address,
        port=_port(b.port, f"bastion {b.address}"),
        user=b.user,
        ssh_key=b.ssh_key,
        ssh_key_path="" if b.ssh_key else (b.ssh_key_path or config.ssh_key_path),
        ssh_cert=b.ssh_cert,
        ssh_cert_path="" if b.ssh_cert else (b.ssh_cert_path or config.ssh_cert_path),
        ssh_agent_auth=b.ssh_agent_auth or config.ssh_agent_auth,
        name=f"bastion {b.address}",
    )
