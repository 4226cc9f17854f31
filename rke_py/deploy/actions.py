"""The diff: desired (NodePlan) against observed (HostFacts) gives the actions for one host.

Pure, so `rke-py plan` can print exactly what `up` will do and tests can check it with plain data.
"""

from __future__ import annotations

from dataclasses import dataclass

from rke_py.config.schema import Node
from rke_py.deploy.facts import HostFacts
from rke_py.plan.model import ContainerSpec, FileSpec, NodePlan

PLANES = ("etcd", "control", "worker")


@dataclass(frozen=True)
class Action:
    """One change to one host: write-file, pull-image, create, replace, start or remove; and for hosts
    that left cluster.yml, remove-member (run through a remaining etcd host) and clean-host; for an etcd
    node new to a running cluster, add-member (also through a running member)."""

    kind: str
    plane: str  # "cleanup", "files", "images", "etcd", "control" or "worker": the phase it runs in
    target: str  # file path, image or container name
    reason: str = ""
    file: FileSpec | None = None
    spec: ContainerSpec | None = None
    node: Node | None = None  # add-member, remove-member: the host whose etcd member comes or goes

    def describe(self) -> str:
        text = f"{self.kind} {self.target}"
        return f"{text} ({self.reason})" if self.reason else text


def diff_host(plan: NodePlan, facts: HostFacts) -> list[Action]:
    """Every action that brings `facts` to `plan`, in the order they must run."""
    actions = [_file_action(f, facts) for f in plan.files]
    actions = [a for a in actions if a]
    wanted_images = dict.fromkeys(c.image for c in plan.containers if _container_action(c, facts, "x"))
    actions += [Action("pull-image", "images", i) for i in wanted_images if i not in facts.images]
    for plane in PLANES:
        for spec in getattr(plan, plane):
            action = _container_action(spec, facts, plane)
            if action:
                actions.append(action)
    planned = {c.name for c in plan.containers}
    for name in sorted(facts.containers):
        if name not in planned:
            actions.insert(0, Action("remove", "cleanup", name, "not planned for this node's roles"))
    return actions


def _file_action(f: FileSpec, facts: HostFacts) -> Action | None:
    have = facts.file_hashes.get(f.path)
    if have == f.sha256:
        return None
    return Action("write-file", "files", f.path, "missing" if have is None else "content changed", file=f)


def _container_action(spec: ContainerSpec, facts: HostFacts, plane: str) -> Action | None:
    seen = facts.containers.get(spec.name)
    if seen is None:
        return Action("create", plane, spec.name, "missing", spec=spec)
    if seen.spec_hash != spec.spec_hash():
        why = "not started by rke-py" if not seen.spec_hash else "spec changed"
        return Action("replace", plane, spec.name, why, spec=spec)
    if spec.start and not seen.running:
        return Action("start", plane, spec.name, "stopped", spec=spec)
    return None
