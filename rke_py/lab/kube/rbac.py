"""Authorization as kube-apiserver v1.28 does it with ``--authorization-mode=Node,RBAC``.

RBAC is evaluated from the Roles, ClusterRoles and bindings stored in etcd, which the apiserver seeds with
Kubernetes' real bootstrap policy (``policy/``, read from a real v1.28.0 apiserver). The Node authorizer
recognises only ``system:node:<name>`` in group ``system:nodes`` and grants such a node the rules of the
bootstrap ``system:node`` role, its own Lease and writes to its own Node; the shared ``system:node``
identity of RKE's kube-node certificate is not a node to it. So, as on real Kubernetes, kubelets using
RKE's certificate get nothing until a ClusterRoleBinding grants group ``system:nodes`` a role.
"""

import json
import os
from dataclasses import dataclass, field

POLICY_DIR = os.path.join(os.path.dirname(__file__), "policy")
BOOTSTRAP_FILES = (
    "bootstrap-clusterroles.json",
    "bootstrap-clusterrolebindings.json",
    "bootstrap-roles-and-rolebindings.json",
)
NODE_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"


def bootstrap_objects() -> list[dict]:
    """The objects a new v1.28 cluster holds before anything is applied, ClusterRoles first."""
    items: list[dict] = []
    for name in BOOTSTRAP_FILES:
        with open(os.path.join(POLICY_DIR, name), encoding="utf-8") as handle:
            items += json.load(handle)["items"]
    return items


@dataclass(frozen=True)
class Attributes:
    """What is asked: a resource request (``resource`` set) or a non-resource path."""

    user: str
    groups: tuple[str, ...]
    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


def _matches(values: list[str], wanted: str) -> bool:
    return "*" in values or wanted in values


def rule_allows(rule: dict, attrs: Attributes) -> bool:
    if not _matches(rule.get("verbs") or [], attrs.verb):
        return False
    if not attrs.resource:
        return any(
            url == attrs.path or url == "*" or (url.endswith("*") and attrs.path.startswith(url[:-1]))
            for url in rule.get("nonResourceURLs") or []
        )
    if not _matches(rule.get("apiGroups") or [], attrs.group):
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or []
    if not (
        "*" in resources
        or combined in resources
        or (attrs.subresource and f"*/{attrs.subresource}" in resources)
    ):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _subject_is(subject: dict, user: str, groups: tuple[str, ...]) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        return user == f"system:serviceaccount:{subject.get('namespace', '')}:{name}"
    return False


@dataclass
class Policy:
    """The stored RBAC objects, indexed for evaluation."""

    cluster_roles: dict[str, list[dict]] = field(default_factory=dict)
    roles: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    cluster_bindings: list[dict] = field(default_factory=list)
    bindings: list[dict] = field(default_factory=list)

    @classmethod
    def from_objects(cls, objects: list[dict]) -> "Policy":
        policy = cls()
        for obj in objects:
            meta = obj.get("metadata") or {}
            kind = obj.get("kind")
            if kind == "ClusterRole":
                policy.cluster_roles[meta["name"]] = obj.get("rules") or []
            elif kind == "Role":
                policy.roles[(meta.get("namespace", ""), meta["name"])] = obj.get("rules") or []
            elif kind == "ClusterRoleBinding":
                policy.cluster_bindings.append(obj)
            elif kind == "RoleBinding":
                policy.bindings.append(obj)
        return policy

    def _rules(self, binding: dict) -> list[dict]:
        ref = binding.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole":
            return self.cluster_roles.get(ref.get("name", ""), [])
        return self.roles.get((binding["metadata"].get("namespace", ""), ref.get("name", "")), [])

    def allows(self, attrs: Attributes) -> bool:
        candidates = list(self.cluster_bindings)
        if attrs.namespace:
            candidates += [b for b in self.bindings if b["metadata"].get("namespace") == attrs.namespace]
        for binding in candidates:
            if not any(_subject_is(s, attrs.user, attrs.groups) for s in binding.get("subjects") or []):
                continue
            if any(rule_allows(rule, attrs) for rule in self._rules(binding)):
                return True
        return False


def node_name(user: str, groups: tuple[str, ...]) -> str:
    """The node an identity is, for the Node authorizer; "" when it is none."""
    if NODES_GROUP in groups and user.startswith(NODE_PREFIX) and len(user) > len(NODE_PREFIX):
        return user[len(NODE_PREFIX) :]
    return ""


class NodeAuthorizer:
    """Identified nodes get the bootstrap system:node rules; Leases and Node writes only for themselves."""

    def __init__(self) -> None:
        roles = [o for o in bootstrap_objects() if o["kind"] == "ClusterRole"]
        self.rules = next(o["rules"] for o in roles if o["metadata"]["name"] == "system:node")

    def allows(self, attrs: Attributes) -> bool:
        node = node_name(attrs.user, attrs.groups)
        if not node or not attrs.resource:
            return False
        if attrs.resource == "leases" and attrs.group == "coordination.k8s.io":
            own = attrs.namespace == "kube-node-lease" and attrs.name == node
            return own and any(rule_allows(r, attrs) for r in self.rules)
        writes = attrs.verb in ("create", "update", "patch", "delete")
        if attrs.resource == "nodes" and not attrs.group and writes and attrs.name not in ("", node):
            return False
        return any(rule_allows(r, attrs) for r in self.rules)
