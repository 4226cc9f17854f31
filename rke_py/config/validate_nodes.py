"""Checks on `nodes`: required keys, roles, ports, node names, taints, and what the roles add up to.

rke-py is stricter than RKE here: it requires a controlplane and a worker node (RKE only requires etcd,
and a cluster without the others cannot run a pod).
"""

from __future__ import annotations

from rke_py.config import values
from rke_py.config.findings import Findings, Path, did_you_mean, dotted
from rke_py.config.schema import ROLES, ClusterConfig, Node

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
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


def nodes(config: ClusterConfig, findings: Findings) -> None:
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
    check_port(node.port, (*path, "port"), findings)
    _hostname(node, path, findings)
    for position, taint in enumerate(node.taints):
        _taint(taint.key, taint.effect, (*path, "taints", position), findings)


def _label(index: int, node: Node) -> str:
    return f"nodes[{index}] ({node.address})" if node.address else f"nodes[{index}]"


def _role(role: str, path: Path, label: str, findings: Findings) -> None:
    if role in ROLES:
        return
    hint = "a role is etcd, controlplane or worker" + did_you_mean(role, ROLES)
    findings.error(path, f'unknown role "{role}" on {label}', hint)


def check_port(port: str, path: Path, findings: Findings) -> None:
    if not (values.DIGITS.match(port) and 1 <= int(port) <= 65535):
        findings.error(path, f'{dotted(path)} "{port}" is not a port number', "use a number from 1 to 65535")


def _hostname(node: Node, path: Path, findings: Findings) -> None:
    """The node name (hostname_override, else the address) must be one Kubernetes accepts."""
    name = node.name
    key = _name_key(path[1], findings)
    if not name or values.subdomain(name) is None or (key == "address" and values.host(node.address)):
        return  # an address that is wrong is reported as an address
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
            "use NoSchedule, PreferNoSchedule or NoExecute" + did_you_mean(effect, TAINT_EFFECTS),
        )


def duplicates(config: ClusterConfig, findings: Findings) -> None:
    """Address is a node's identity for RKE; the hostname is its Kubernetes name. Both must be unique."""
    addresses = _repeats([values.normal_host(node.address) for node in config.nodes])
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


def loopback(config: ClusterConfig, findings: Findings) -> None:
    """127.0.0.1 or ::1 names a different machine for each node: only a one-node cluster may use it."""
    if len(config.nodes) < 2:
        return
    for index, node in enumerate(config.nodes):
        for key in ("address", "internal_address"):
            address = values.ip(getattr(node, key))
            if address is not None and address.is_loopback and (("nodes", index, key) in findings.positions):
                findings.error(
                    ("nodes", index, key),
                    f"nodes[{index}].{key} {address} is a loopback address in a cluster of"
                    f" {len(config.nodes)} nodes",
                    "every node needs an address the other nodes can reach",
                )


def roles_present(config: ClusterConfig, findings: Findings) -> None:
    if not config.nodes:
        return
    external = bool(config.services.etcd.external_urls)
    for role in ROLES:
        if config.hosts(role) or (role == "etcd" and external):
            continue
        findings.error(("nodes",), f"no node has the {role} role", f"add {ROLE_EXAMPLE[role]}")


def etcd_count(config: ClusterConfig, findings: Findings) -> None:
    count = len(config.hosts("etcd"))
    if count and count % 2 == 0:
        quorum = count // 2 + 1
        findings.warning(
            ("nodes",),
            f"{count} etcd nodes: quorum is {quorum}, so etcd survives {count - quorum} failure(s),"
            f" no more than with {count - 1}",
            "use an odd number of etcd nodes, 3 or 5",
        )
