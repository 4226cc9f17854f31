"""Cordon, drain and uncordon a Node, as `kubectl cordon/drain/uncordon` do, through rke-py's API client."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

from rke_py.kube.api import KubeAPI, KubeAPIError, node_ready

MIRROR = "kubernetes.io/config.mirror"  # static pods' mirrors cannot be evicted


def cordon(api: KubeAPI, name: str, unschedulable: bool) -> None:
    api.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True if unschedulable else None}})


def wait_ready(api: KubeAPI, name: str, timeout: float, pause: float = 2) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if node_ready(api.find(f"/api/v1/nodes/{name}") or {}):
            return
        if time.monotonic() > deadline:
            raise KubeAPIError(f"node {name} is not Ready after {timeout:.0f}s", 0)
        time.sleep(pause)


def _evictable(pod: dict[str, Any], options: dict[str, Any]) -> tuple[bool, str]:
    """(evict it, why not) for one pod, with kubectl drain's rules."""
    meta = pod.get("metadata") or {}
    if MIRROR in (meta.get("annotations") or {}):
        return False, ""
    owners = [o.get("kind") for o in meta.get("ownerReferences") or [] if o.get("controller")]
    if "DaemonSet" in owners:
        return False, "" if options["ignore_daemonsets"] else f"{meta.get('name')} is managed by a DaemonSet"
    if not owners and not options["force"]:
        return False, f"{meta.get('name')} is not managed by a controller (node_drain_input.force)"
    volumes = (pod.get("spec") or {}).get("volumes") or []
    if any("emptyDir" in v for v in volumes) and not options["delete_empty_dir_data"]:
        return False, f"{meta.get('name')} uses emptyDir (node_drain_input.delete_empty_dir_data)"
    return True, ""


def drain(api: KubeAPI, name: str, options: dict[str, Any], pause: float = 2) -> None:
    """Evict every pod drain would evict (once each, again only when a disruption budget said not yet)
    and wait until they are gone or `timeout`; refuse as kubectl does."""
    selector = urllib.parse.quote(f"spec.nodeName={name}")
    pods = (api.get(f"/api/v1/pods?fieldSelector={selector}") or {}).get("items", [])
    verdicts = [(pod, *_evictable(pod, options)) for pod in pods]
    refused = [why for _, ok, why in verdicts if not ok and why]
    if refused:
        raise KubeAPIError(f"cannot drain node {name}: {'; '.join(refused)}", 0)
    deadline = time.monotonic() + options["timeout"]
    pending = {
        f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}": m
        for m in (p["metadata"] for p, ok, _ in verdicts if ok)
    }
    evicted: set[str] = set()
    while pending:
        for path, meta in list(pending.items()):
            if path not in evicted and _evict(api, path, meta, options["grace_period"]):
                evicted.add(path)
            if api.find(path) is None:
                del pending[path]
        if pending and time.monotonic() > deadline:
            names = ", ".join(m["name"] for m in pending.values())
            raise KubeAPIError(f"drain of node {name} timed out after {options['timeout']}s: {names}", 0)
        if pending:
            time.sleep(pause)


def _evict(api: KubeAPI, path: str, meta: dict[str, Any], grace_period: int) -> bool:
    """Ask for the pod's eviction; False when a disruption budget says not yet (429), to ask again."""
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }
    if grace_period >= 0:
        body["deleteOptions"] = {"gracePeriodSeconds": grace_period}
    try:
        api.request("POST", f"{path}/eviction", body)
    except KubeAPIError as exc:
        if exc.status == 429:
            return False
        if exc.status != 404:  # 404: gone already
            raise
    return True
