"""Objects rke-py keeps in the Kubernetes API (today: RBAC), diffed against what the API holds.

Only the fields rke-py sets are compared, so an object RKE created the same way, or one others annotated,
is left alone; a difference is applied with server-side apply under rke-py's field manager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rke_py.deploy.actions import ApplyObject

PLURALS = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}


def object_path(obj: dict[str, Any]) -> str:
    """The object's URL path: /api/v1/... for the core group, /apis/GROUP/VERSION/... otherwise."""
    api_version, kind, meta = obj["apiVersion"], obj["kind"], obj["metadata"]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    namespace = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    return f"{base}{namespace}/{PLURALS[kind]}/{meta['name']}"


def object_ref(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    name = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
    return f"{obj['kind'].lower()}/{name}"


def changed_fields(desired: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The fields rke-py sets that the API holds differently (labels and annotations key by key)."""
    changed = [
        key
        for key, value in desired.items()
        if key not in ("apiVersion", "kind", "metadata") and current.get(key) != value
    ]
    for part in ("labels", "annotations"):
        have = current.get("metadata", {}).get(part) or {}
        changed += [
            f"metadata.{part}.{k}" for k, v in desired["metadata"].get(part, {}).items() if have.get(k) != v
        ]
    return changed


def object_actions(
    objects: list[dict[str, Any]], get: Callable[[str], dict[str, Any] | None] | None
) -> list[ApplyObject]:
    """What to apply. `get` reads an object (None when it does not exist); without it no apiserver
    answers yet, so every object is to be applied."""
    actions = []
    for obj in objects:
        current = get(object_path(obj)) if get is not None else None
        if current is None:
            reason = "missing" if get is not None else "the cluster is not running yet"
            actions.append(ApplyObject(obj=obj, ref=object_ref(obj), reason=reason))
        elif changed := changed_fields(obj, current):
            actions.append(ApplyObject(obj=obj, ref=object_ref(obj), reason=f"{', '.join(changed)} differ"))
    return actions
