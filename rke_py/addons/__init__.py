"""The add-ons rke-py keeps in the cluster, in RKE's order: network plugin, DNS (and NodeLocal DNSCache),
metrics-server, ingress, then the user's add-ons (inline, then included).

Each add-on is a list of Kubernetes objects built from cluster.yml, named as RKE named the add-on
(`rke-network-plugin`, ...). Every object is labelled with that name, so objects of an add-on that is
switched off, or that an add-on no longer has, are found and removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rke_py.addons import dns, ingress, metrics, network, user
from rke_py.addons.k8s import ADDON_LABEL, Obj, labelled
from rke_py.config.schema import ClusterConfig

# Workloads whose rollout `status` reports
WORKLOAD_KINDS = ("DaemonSet", "Deployment")
# Where rke-py looks for objects to prune (with the kinds of the current user add-ons): every kind its
# templates use, and what user add-ons usually hold. apiVersion/kind.
PRUNE_KINDS = (
    "v1/ConfigMap",
    "v1/Secret",
    "v1/Service",
    "v1/ServiceAccount",
    "v1/Namespace",
    "apps/v1/DaemonSet",
    "apps/v1/Deployment",
    "apps/v1/StatefulSet",
    "batch/v1/Job",
    "batch/v1/CronJob",
    "rbac.authorization.k8s.io/v1/ClusterRole",
    "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
    "rbac.authorization.k8s.io/v1/Role",
    "rbac.authorization.k8s.io/v1/RoleBinding",
    "networking.k8s.io/v1/IngressClass",
    "networking.k8s.io/v1/Ingress",
    "networking.k8s.io/v1/NetworkPolicy",
    "policy/v1/PodDisruptionBudget",
    "apiextensions.k8s.io/v1/CustomResourceDefinition",
    "apiregistration.k8s.io/v1/APIService",
)
DNS_ADDONS = {"coredns": "rke-coredns-addon", "kube-dns": "rke-kube-dns-addon"}  # provider: RKE's name
DNS_DEPLOYMENTS = {"coredns": "coredns", "kube-dns": "kube-dns"}  # the Deployment that answers, each
# RKE deployed add-ons with Jobs named after the add-on; rke-py removes them once they finished.
RKE_JOBS = tuple(
    f"{name}-deploy-job"
    for name in (
        "rke-network-plugin",
        *DNS_ADDONS.values(),
        "rke-nodelocal-addon",
        "rke-metrics-addon",
        "rke-ingress-controller",
        "rke-user-addon",
        "rke-user-includes-addons",
    )
)
FIRST = ("Namespace", "CustomResourceDefinition")  # what user add-ons' other objects may need to exist


@dataclass
class Addon:
    name: str  # RKE's name for it, e.g. rke-network-plugin; the value of the addon label
    objects: list[Obj] = field(default_factory=list)
    critical: bool = True  # RKE stops `up` when a system add-on fails; user add-ons only warn


def build(config: ClusterConfig, base: Path | None = None) -> list[Addon]:
    """Every add-on cluster.yml asks for, with its objects labelled; add-ons set to `none` are empty (so
    their objects are pruned). Raises ConfigError for user add-ons that cannot be read."""
    inline, included = user.user_objects(
        config.addons, config.addons_include, config.positions, config.source, base or Path(".")
    )
    # the DNS provider in use first; the other one's add-on stays, empty, so what it left is removed
    providers = sorted(DNS_ADDONS.items(), key=lambda item: item[0] != config.dns.provider)
    found = [
        Addon("rke-network-plugin", network.objects(config)),
        *(Addon(name, dns.objects(config) if p == config.dns.provider else []) for p, name in providers),
        Addon("rke-nodelocal-addon", dns.nodelocal_objects(config)),
        Addon("rke-metrics-addon", metrics.objects(config)),
        Addon("rke-ingress-controller", ingress.objects(config)),
        Addon("rke-user-addon", _ordered(inline), critical=False),
        Addon("rke-user-includes-addons", _ordered(included), critical=False),
    ]
    for addon in found:
        addon.objects = [labelled(item, addon.name) for item in addon.objects]
    return found


def _ordered(objects: list[Obj]) -> list[Obj]:
    return sorted(objects, key=lambda item: item["kind"] not in FIRST)


__all__ = [
    "ADDON_LABEL",
    "DNS_ADDONS",
    "DNS_DEPLOYMENTS",
    "PRUNE_KINDS",
    "RKE_JOBS",
    "WORKLOAD_KINDS",
    "Addon",
    "build",
]
