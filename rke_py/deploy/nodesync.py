"""The Node objects rke-py keeps: labels and taints as RKE's SyncLabelsAndTaints sets them, and the Nodes
of hosts that left cluster.yml. Diffed against what the API holds, so `plan` lists only real changes."""

from __future__ import annotations

from typing import Any

from rke_py.config.schema import ROLES, ClusterConfig, Node
from rke_py.deploy.actions import ClusterAction, DeleteNode, SyncNode
from rke_py.plan.kubelet import role_taints

ROLE_LABEL = "node-role.kubernetes.io"


def node_patch(node: Node, current: dict[str, Any]) -> dict[str, Any]:
    """A merge patch: role labels for the node's roles (others removed), the configured labels and taints,
    and the role taints; taints others set stay."""
    labels: dict[str, str | None] = {f"{ROLE_LABEL}/{r}": ("true" if node.has(r) else None) for r in ROLES}
    labels |= dict(node.labels)
    labels |= {"rke.cattle.io/external-ip": node.address, "rke.cattle.io/internal-ip": node.internal_address}
    ours = [{"key": k, "value": "true", "effect": e} for k, e in role_taints(node)]
    ours += [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints]
    managed = {t["key"] for t in ours}
    kept = [
        t
        for t in current.get("spec", {}).get("taints") or []
        if t.get("key") not in managed and not t.get("key", "").startswith(ROLE_LABEL + "/")
    ]
    return {"metadata": {"labels": labels}, "spec": {"taints": (kept + ours) or None}}


def patch_changes(current: dict[str, Any], patch: dict[str, Any]) -> list[str]:
    """What applying `patch` would change on `current`, in words; empty when nothing."""
    have = current.get("metadata", {}).get("labels") or {}
    changes = []
    for key, value in patch["metadata"]["labels"].items():
        if value is None and key in have:
            changes.append(f"label {key} removed")
        elif value is not None and have.get(key) != value:
            changes.append(f"label {key}={value}")
    taints = current.get("spec", {}).get("taints") or []
    wanted = patch["spec"]["taints"] or []
    if _taint_set(taints) != _taint_set(wanted):
        added = _taint_set(wanted) - _taint_set(taints)
        removed = _taint_set(taints) - _taint_set(wanted)
        changes += [f"taint {k}={v}:{e}" for k, v, e in sorted(added)]
        changes += [f"taint {k}:{e} removed" for k, _, e in sorted(removed)]
    return changes


def _taint_set(taints: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(t.get("key", ""), t.get("value", "") or "", t.get("effect", "")) for t in taints}


def node_actions(
    config: ClusterConfig, registered: dict[str, dict[str, Any]] | None, removed: list[Node]
) -> list[ClusterAction]:
    """The Node changes `up` makes. `registered`: the API's Nodes by name, or None while no apiserver
    answers (a new cluster): then every node is to be synced once it registers."""
    actions: list[ClusterAction] = []
    for node in config.nodes:
        current = None if registered is None else registered.get(node.name)
        if current is None:
            actions.append(SyncNode(node.name, node, "when it registers"))
            continue
        changes = patch_changes(current, node_patch(node, current))
        if changes:
            actions.append(SyncNode(node.name, node, "; ".join(changes)))
    for node in removed:
        if registered is None or node.name in registered:
            actions.append(DeleteNode(node.name))
    return actions
