"""Handing cluster DNS from one provider to the other without a lost query.

CoreDNS and kube-dns sit behind the same Services (`kube-dns`, and NodeLocal DNSCache's `kube-dns-upstream`),
which select both providers' pods by `k8s-app: kube-dns`. Deleting the old provider's pods while the
Services still send to them loses queries: kube-dns's dnsmasq stops at once, and kube-proxy on each node
takes a moment to notice (2 to 5 queries lost at ten a second, measured). So before the old provider's
objects go, the Services select the new provider's pods alone (by their ReplicaSet's `pod-template-hash`);
once their EndpointSlices list nothing else and kube-proxy has had time to follow, the old objects are
deleted, the old Deployment until its pods are gone, and the Services applied again as cluster.yml has
them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rke_py.addons import DNS_DEPLOYMENTS
from rke_py.addons.coredns import DNS_LABELS
from rke_py.addons.k8s import SYSTEM, label_selector, object_ref
from rke_py.deploy.actions import ApplyObject, ClusterAction, DeleteObject, ServeOnly
from rke_py.deploy.objects import APPLIED, stamped
from rke_py.kube.api import KubeAPI, KubeAPIError

HANDING_OVER = "handing-over"  # the applied hash of a narrowed Service: a killed run's next up restores it
SETTLE = 5.0  # seconds for kube-proxy on every node to follow the EndpointSlices (CoreDNS's lameduck)
REVISION = "deployment.kubernetes.io/revision"


def handed_over(
    deletes: list[DeleteObject], provider: str, wanted: Sequence[dict[str, Any]]
) -> list[ClusterAction]:
    """`deletes` (what an add-on left), with the hand-over around them when they take away the Deployment
    of the DNS provider no longer in use and another provider takes its place."""
    leaving = {f"deployment/{SYSTEM}/{name}" for p, name in DNS_DEPLOYMENTS.items() if p != provider}
    old = next((d for d in deletes if d.ref in leaving), None)
    services = [o for o in wanted if o["kind"] == "Service" and o["spec"].get("selector") == DNS_LABELS]
    if old is None or provider not in DNS_DEPLOYMENTS or not services:
        return list(deletes)
    new = DNS_DEPLOYMENTS[provider]
    serve = ServeOnly(
        deployment=new,
        leaving=old.name,
        services=tuple(services),
        reason=f"{', '.join(map(object_ref, services))} stop sending to {old.name}'s pods before they go",
        addon=old.addon,
    )
    restore = [
        ApplyObject(
            obj=stamped(s),
            ref=object_ref(s),
            reason=f"selecting every {provider} pod again, {old.name} gone",
            phase="addons",
            addon=old.addon,
        )
        for s in services
    ]
    # its pods gone before the Services select by k8s-app alone again, or they would rejoin them until
    # the garbage collector came for them
    last = replace(old, until_gone=True, reason=f"{old.reason}; until its pods are gone")
    return [serve, *(d for d in deletes if d is not old), last, *restore]


def serve_only(api: KubeAPI, action: ServeOnly, timeout: float, settle: float = SETTLE) -> None:
    """Point the Services at the current pods of `action.deployment` alone and return once every node may
    have followed. Nothing to do when the leaving Deployment has no pod available: nothing is sent there."""
    if not available(api, action.leaving):
        return
    template_hash = _template_hash(api, action.deployment)
    pods = {
        p["metadata"]["name"]
        for p in api.list("v1", "Pod", f"{label_selector(DNS_LABELS)},pod-template-hash={template_hash}")
        if p["metadata"].get("namespace") == SYSTEM
    }
    for service in action.services:
        narrow = narrowed(service, template_hash)
        api.apply(api.object_path(narrow), narrow)
    deadline = time.monotonic() + timeout
    while not all(_serves_only(api, s["metadata"]["name"], pods) for s in action.services):
        if time.monotonic() > deadline:
            raise KubeAPIError(f"Services still send beside {action.target} after {timeout:.0f}s")
        time.sleep(0.5)
    time.sleep(settle)


def narrowed(service: dict[str, Any], template_hash: str) -> dict[str, Any]:
    """`service` selecting only the pods of one ReplicaSet, marked as not what cluster.yml asks for."""
    metadata = {**service["metadata"], "annotations": {**service["metadata"].get("annotations", {})}}
    metadata["annotations"][APPLIED] = HANDING_OVER
    spec = {**service["spec"], "selector": {**DNS_LABELS, "pod-template-hash": template_hash}}
    return {**service, "metadata": metadata, "spec": spec}


def available(api: KubeAPI, deployment: str) -> bool:
    """Whether a DNS provider's Deployment has a pod that answers (the Services may send there)."""
    found = api.find(_deployment_path(deployment))
    return bool(found and (found.get("status") or {}).get("availableReplicas"))


def _deployment_path(name: str) -> str:
    return f"/apis/apps/v1/namespaces/{SYSTEM}/deployments/{name}"


def _template_hash(api: KubeAPI, deployment: str) -> str:
    """The pod-template-hash of the Deployment's current ReplicaSet (the one of its revision)."""
    found = api.get(_deployment_path(deployment))
    revision = (found["metadata"].get("annotations") or {}).get(REVISION)
    for replica_set in api.list("apps/v1", "ReplicaSet", label_selector(DNS_LABELS)):
        meta = replica_set["metadata"]
        owners = {o.get("uid") for o in meta.get("ownerReferences") or []}
        if found["metadata"]["uid"] in owners and (meta.get("annotations") or {}).get(REVISION) == revision:
            return str(meta["labels"]["pod-template-hash"])
    raise KubeAPIError(f"deployment/{SYSTEM}/{deployment} has no ReplicaSet of its revision {revision}")


def _serves_only(api: KubeAPI, service: str, pods: set[str]) -> bool:
    """Whether the Service's EndpointSlices list some of `pods` and nothing else."""
    slices = [
        s
        for s in api.list("discovery.k8s.io/v1", "EndpointSlice", f"kubernetes.io/service-name={service}")
        if s["metadata"].get("namespace") == SYSTEM
    ]
    served = {(e.get("targetRef") or {}).get("name") for s in slices for e in s.get("endpoints") or []}
    return bool(served) and served <= pods
