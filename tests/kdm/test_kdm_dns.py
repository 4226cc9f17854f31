"""rke-py's CoreDNS objects against RKE's own rendering of KDM's template, for every Kubernetes version
rke-py carries. RKE's inputs (cluster/addons.go CoreDNSOptions) are built here the way RKE builds them,
with RKE's defaults (cluster/defaults.go), from the cluster.yml rke-py parsed."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from rke_py.addons import build
from rke_py.config import kdm as versions
from rke_py.config import load_text
from rke_py.config.schema import ClusterConfig
from tests.kdm import kdm

pytestmark = pytest.mark.kdm

NODES = "nodes: [{address: 192.0.2.11, user: u, role: [etcd, controlplane, worker]}]\n"
CLUSTERS = {
    "defaults": "",
    "everything": """
dns:
  provider: coredns
  upstreamnameservers: [192.0.2.53, 192.0.2.54]
  reversecidrs: [10.0.0.0/8]
  node_selector: {dns: "yes"}
  tolerations: [{key: dedicated, operator: Equal, value: dns, effect: NoSchedule}]
  update_strategy: {strategy: RollingUpdate, rollingUpdate: {maxUnavailable: 2}}
  linear_autoscaler_params: {cores_per_replica: 64, nodes_per_replica: 2, min: 2, max: 9}
  options: {coredns_priority_class_name: dns-high, coredns_autoscaler_priority_class_name: dns-low}
services: {kubelet: {cluster_domain: corp.local, cluster_dns_server: 10.43.0.53}}
""",
}
VERSIONS = [v for v in versions.versions() if versions.version_key(v)[:2] >= (1, 27)]


def _linear(config: ClusterConfig) -> str:
    """json.Marshal of RKE's LinearAutoscalerParams: its defaults when unset, omitempty fields."""
    p = config.dns.linear_autoscaler_params
    if p is None:
        fields: dict[str, Any] = {"coresPerReplica": 128, "nodesPerReplica": 4, "min": 1}
        fields["preventSinglePointFailure"] = True
    else:
        fields = {
            "coresPerReplica": p.cores_per_replica,
            "nodesPerReplica": p.nodes_per_replica,
            "min": p.min,
            "max": p.max,
            "preventSinglePointFailure": p.prevent_single_point_failure,
        }
    return json.dumps({k: v for k, v in fields.items() if v}, separators=(",", ":"))


def _dns_strategy(config: ClusterConfig) -> dict[str, Any]:
    """setDNSDeploymentAddonDefaults for CoreDNS, as the appsv1.DeploymentStrategy RKE passes."""
    given = config.dns.update_strategy
    kind, rolling = given.get("strategy", ""), given.get("rollingUpdate")
    if kind not in ("", "RollingUpdate"):
        return {"type": kind, "rollingUpdate": rolling} if rolling else {"type": kind}
    if rolling is None:
        return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    strategy: dict[str, Any] = {"type": kind} if kind else {}
    return {**strategy, "rollingUpdate": {"maxUnavailable": 1, **rolling}}


def coredns_options(config: ClusterConfig) -> dict[str, Any]:
    dns, kubelet = config.dns, config.services.kubelet
    toleration_fields = ("key", "operator", "value", "effect", "tolerationSeconds")
    return {
        "RBACConfig": config.authorization.mode,
        "CoreDNSImage": config.system_images.coredns,
        "CoreDNSAutoScalerImage": config.system_images.coredns_autoscaler,
        "ClusterDomain": kubelet.cluster_domain,
        "ClusterDNSServer": kubelet.cluster_dns_server,
        "ReverseCIDRs": dns.reversecidrs or None,
        "UpstreamNameservers": dns.upstreamnameservers or None,
        "NodeSelector": dns.node_selector or None,
        "UpdateStrategy": _dns_strategy(config),
        "LinearAutoscalerParams": _linear(config),
        "Tolerations": [
            {f: getattr(t, f) for f in toleration_fields if getattr(t, f) not in ("", None)}
            for t in dns.tolerations
        ]
        or None,
        "CoreDNSPriorityClassName": dns.options.get("coredns_priority_class_name", ""),
        "CoreDNSAutoscalerPriorityClassName": dns.options.get("coredns_autoscaler_priority_class_name", ""),
    }


def with_rke_py_departures(objects: list[kdm.Obj]) -> list[kdm.Obj]:
    """RKE's CoreDNS objects with what rke-py does differently on purpose (README, "Add-ons"): the
    Deployment leaves its replicas to the autoscaler, and reverse CIDRs are zones in the Corefile, not
    Go's printing of a list (`[10.0.0.0/8]`)."""
    for item in objects:
        if item["kind"] == "Deployment" and item["metadata"]["name"] == "coredns":
            item["spec"].pop("replicas", None)
        if item["kind"] == "ConfigMap" and item["metadata"]["name"] == "coredns":
            corefile = item["data"]["Corefile"]
            item["data"]["Corefile"] = re.sub(r"\[([^]]*)\]", r"\1", corefile)
    return objects


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
def test_kdm_coredns_objects_equal_rkes(cluster: str, version: str) -> None:
    text = f"{NODES}kubernetes_version: {version}\n{CLUSTERS[cluster]}"
    config = load_text(text).config
    rke = kdm.render("coreDNS", version, coredns_options(config), pointers=("UpdateStrategy",))
    ours = next(a.objects for a in build(config) if a.name == "rke-coredns-addon")
    assert kdm.differences(with_rke_py_departures(rke), ours) == []
