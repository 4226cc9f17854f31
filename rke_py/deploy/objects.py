"""Objects rke-py keeps in the Kubernetes API (RBAC, add-ons), diffed against what the API holds.

Each object is applied with an annotation holding the hash of what rke-py sent, so a no-op `up` sends
nothing, a field rke-py stopped setting is noticed, and an object RKE created (no annotation yet) is taken
over once, in place, with server-side apply. Someone else's edit to a field rke-py sets is noticed too:
every field rke-py sets must still hold its value (fields the API fills in are not compared).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from rke_py.addons.k8s import identity, object_ref
from rke_py.deploy.actions import ApplyObject, DeleteObject

WORKLOADS = ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet")  # whose selector is immutable
APPLIED = "rke-py.io/applied"  # annotation: the hash of the object as rke-py last applied it
Obj = dict[str, Any]


def stamped(obj: Obj) -> Obj:
    """`obj` with the annotation that says what rke-py applied."""
    digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]
    metadata = dict(obj["metadata"])
    metadata["annotations"] = {**(metadata.get("annotations") or {}), APPLIED: digest}
    return {**obj, "metadata": metadata}


def changed_fields(desired: Obj, current: Obj) -> list[str]:
    """Why `current` is not what rke-py applies, in words; empty when it is."""
    have = (current.get("metadata") or {}).get("annotations") or {}
    want = desired["metadata"]["annotations"][APPLIED]
    changed = []
    if have.get(APPLIED) != want:
        changed.append("changed in cluster.yml or rke-py" if APPLIED in have else "not applied by rke-py yet")
    changed += [
        f"{key} differs"
        for key, value in desired.items()
        if key not in ("apiVersion", "kind", "metadata") and not _holds(value, current.get(key))
    ]
    for part in ("labels", "annotations"):
        held = (current.get("metadata") or {}).get(part) or {}
        changed += [
            f"metadata.{part}.{k} differs"
            for k, v in (desired["metadata"].get(part) or {}).items()
            if held.get(k) != v and k != APPLIED
        ]
    return changed


def _holds(want: Any, have: Any) -> bool:
    """Whether `have` holds every value of `want` (the API adds defaults beside them, and leaves out
    fields at their zero value: empty maps, lists and strings, 0, false)."""
    if have is None and (want in ({}, [], "") or want is False or (type(want) is int and want == 0)):
        return True
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_holds(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(_holds, want, have))
    return bool(want == have)


def _immutable_change(desired: Obj, current: Obj) -> str:
    """What of `desired` the API refuses to change in `current` ("" when nothing): a Job's pod template,
    a workload's selector (older rke-py releases and RKE's templates chose different ones)."""
    spec, held = desired.get("spec") or {}, current.get("spec") or {}
    if desired["kind"] == "Job" and not _holds(spec, held):
        return "a Job's pod template"
    if desired["kind"] in WORKLOADS and spec.get("selector") != held.get("selector"):
        return "its selector"
    return ""


def object_actions(
    objects: Iterable[Obj], get: Callable[[Obj], Obj | None] | None, phase: str = "objects", addon: str = ""
) -> list[ApplyObject]:
    """What to apply. `get` reads an object (None when it does not exist); without it no apiserver
    answers yet, so every object is to be applied."""
    actions = []
    for obj in map(stamped, objects):
        current = get(obj) if get is not None else None
        if current is None:
            reason = "missing" if get is not None else "the cluster is not running yet"
        else:
            reason = "; ".join(changed_fields(obj, current))
        immutable = _immutable_change(obj, current) if current is not None else ""
        if immutable:
            reason += f"; {immutable} cannot change: deleted and created again"
        if reason:
            actions.append(
                ApplyObject(
                    obj=obj,
                    ref=object_ref(obj),
                    reason=reason,
                    phase=phase,
                    addon=addon,
                    recreate=bool(immutable),
                )
            )
    return actions


def prune_actions(
    wanted: Iterable[Obj], found: Iterable[Obj], reason: str, addon: str = ""
) -> list[DeleteObject]:
    """Delete what `found` holds that `wanted` does not (both by apiVersion, kind, namespace, name), unless
    it is being deleted already (a namespace terminates for a while); namespaces last, as what is in them
    goes with them."""
    keep = {identity(obj) for obj in wanted}
    # the API drops the namespace a template gives a cluster-scoped object (found ones have none)
    named = {(api, kind, name) for api, kind, _, name in keep}

    def kept(obj: Obj) -> bool:
        api, kind, namespace, name = identity(obj)
        return (api, kind, namespace, name) in keep or (not namespace and (api, kind, name) in named)

    gone = sorted(
        (o for o in found if not kept(o) and not o["metadata"].get("deletionTimestamp")),
        key=lambda obj: obj["kind"] == "Namespace",
    )
    return [DeleteObject(*identity(obj), ref=object_ref(obj), reason=reason, addon=addon) for obj in gone]
