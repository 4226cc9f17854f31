"""The diff: desired (NodePlan) against observed (HostFacts) gives the actions for one host.

Pure, so `rke-py plan` can print exactly what `up` will do and tests can check it with plain data.
"""

from __future__ import annotations

import dataclasses

from rke_py.deploy.actions import (
    CreateContainer,
    HostAction,
    PullImage,
    RemoveContainer,
    ReplaceContainer,
    RestoreContainer,
    StartContainer,
    WriteFile,
)
from rke_py.deploy.facts import HostFacts, ObservedContainer
from rke_py.plan import nginx_proxy
from rke_py.plan.components import REGISTRY, Component, leftover_reason, parked
from rke_py.plan.model import ContainerSpec, FileSpec, NodePlan


def diff_host(
    plan: NodePlan, facts: HostFacts, registry: tuple[Component, ...] = REGISTRY
) -> list[HostAction]:
    """Every action that brings `facts` to `plan`, in the order they must run: cleanup, files, images,
    then each plane's containers in start order."""
    actions: list[HostAction] = []
    planned = {c.name for c in plan.containers}
    for name in sorted(facts.containers):
        if name not in planned:
            seen = facts.containers[name]
            actions.append(RemoveContainer(name, seen.id, "not planned for this node's roles"))
    containers = dict(facts.containers)  # as they will be once interrupted replaces are undone
    for name in sorted(facts.others):
        base = parked(name, registry)
        current = containers.get(base)
        if base in planned and (current is None or not current.running):
            why = "an interrupted replace left it parked and its replacement " + (
                "missing" if current is None else "stopped"
            )
            actions.append(RestoreContainer(base, facts.others[name].id, current.id if current else "", why))
            containers[base] = dataclasses.replace(facts.others[name], name=base, running=True)
        elif reason := leftover_reason(name, registry):
            actions.append(RemoveContainer(name, facts.others[name].id, reason))
    facts = dataclasses.replace(facts, containers=containers)
    writes = [a for f in plan.files if (a := _file_action(f, facts))]
    actions += writes
    written = {w.file.path for w in writes}
    changes: list[CreateContainer | ReplaceContainer | StartContainer] = []
    new: set[str] = set()  # containers made anew, whose volumes their dependents start from
    for p in plan.placed:
        change = _container_action(p.spec, p.plane, facts, written, new)
        if change is not None:
            changes.append(change)
            if not isinstance(change, StartContainer):
                new.add(p.spec.name)
    wanted = dict.fromkeys([*(c.spec.image for c in changes), *plan.images])
    actions += [PullImage(image) for image in wanted if image not in facts.images]
    actions += changes
    return actions


def _file_action(f: FileSpec, facts: HostFacts) -> WriteFile | None:
    have = facts.file_hashes.get(f.path)
    if have == f.sha256:
        return None
    return WriteFile(f, "missing" if have is None else "content changed")


def _container_action(
    spec: ContainerSpec, plane: str, facts: HostFacts, written: set[str], new: set[str]
) -> CreateContainer | ReplaceContainer | StartContainer | None:
    seen = facts.containers.get(spec.name)
    if seen is None:
        return CreateContainer(spec, plane, "missing")
    if seen.spec_hash != spec.spec_hash() and not _runs_as_planned(spec, seen, written, new):
        why = "not started by rke-py; it runs otherwise" if not seen.spec_hash else "spec changed"
        return ReplaceContainer(spec, plane, why, old_id=seen.id, old_running=seen.running)
    if spec.start and not seen.running:
        return StartContainer(spec, plane, "stopped", id=seen.id)
    return None


def _runs_as_planned(spec: ContainerSpec, seen: ObservedContainer, written: set[str], new: set[str]) -> bool:
    """Whether a container RKE started runs what rke-py would start, with the same files and volumes: it
    is then kept as it is (a cluster taken over restarts only what must change)."""
    if seen.config is None:
        return False
    if spec.name == nginx_proxy.NAME and seen.config == nginx_proxy.rkes_run_config(spec, seen.image_env):
        return True  # RKE's proxy for the same apiservers: it reads no file of the host's
    return (
        seen.config == spec.run_config(seen.image_env)
        and not written & set(spec.files)
        and not new & set(spec.volumes_from)
    )
