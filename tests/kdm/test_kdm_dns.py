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
from rke_py.config.schema import ClusterConfig, Toleration
from tests.kdm import kdm

pytestmark = pytest.mark.kdm

NODES = "nodes: [{address: 192.0.2.11, user: u, role: [etcd, controlplane, worker]}]\n"
CLUSTERS = {
    "defaults": "dns: {{provider: {provider}}}\n",
    "recreate": "dns: {{provider: {provider}, update_strategy: {{strategy: Recreate}}}}\n",
    "everything": """
dns:
  provider: {provider}
  upstreamnameservers: [192.0.2.53, 192.0.2.54]
  reversecidrs: [10.0.0.0/8]
  node_selector: {{dns: "yes"}}
  tolerations: [{{key: dedicated, operator: Equal, value: dns, effect: NoSchedule}}]
  update_strategy: {{strategy: RollingUpdate, rollingUpdate: {{maxUnavailable: 2}}}}
  linear_autoscaler_params: {{cores_per_replica: 64, nodes_per_replica: 2, min: 2, max: 9}}
  options: {{{options}}}
{stubdomains}services: {{kubelet: {{cluster_domain: corp.local, cluster_dns_server: 10.43.0.53}}}}
""",
}
VERSIONS = [v for v in versions.versions() if versions.version_key(v)[:2] >= (1, 27)]


def tolerations(given: list[Toleration]) -> list[dict[str, Any]] | None:
    """[]v1.Toleration as RKE passes it: JSON with the empty fields left out, nil when none."""
    fields = ("key", "operator", "value", "effect", "tolerationSeconds")
    return [{f: getattr(t, f) for f in fields if getattr(t, f) not in ("", None)} for t in given] or None


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
    go = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in fields.items() if v}
    return json.dumps(go, separators=(",", ":"))  # Go's encoding/json writes 64.0 as 64


# provider -> KDM's key, RKE's add-on name, the fields naming its images, its dns.options keys, and
# the rolling update RKE's setDNSDeploymentAddonDefaults gives it
PROVIDERS: dict[str, dict[str, Any]] = {
    "coredns": {
        "kdm": "coreDNS",
        "addon": "rke-coredns-addon",
        "images": {"CoreDNSImage": "coredns", "CoreDNSAutoScalerImage": "coredns_autoscaler"},
        "options": {
            "CoreDNSPriorityClassName": "coredns_priority_class_name",
            "CoreDNSAutoscalerPriorityClassName": "coredns_autoscaler_priority_class_name",
        },
        "rolling": {"maxUnavailable": 1, "maxSurge": 0},
        "default": "maxUnavailable",
    },
    "kube-dns": {
        "kdm": "kubeDNS",
        "addon": "rke-kube-dns-addon",
        "images": {
            "KubeDNSImage": "kubedns",
            "DNSMasqImage": "dnsmasq",
            "KubeDNSSidecarImage": "kubedns_sidecar",
            "KubeDNSAutoScalerImage": "kubedns_autoscaler",
        },
        "options": {
            "KubeDNSPriorityClassName": "kube_dns_priority_class_name",
            "KubeDNSAutoscalerPriorityClassName": "kube_dns_autoscaler_priority_class_name",
        },
        "rolling": {"maxUnavailable": 0, "maxSurge": "10%"},
        "default": "maxSurge",
    },
}


def _dns_strategy(config: ClusterConfig, provider: dict[str, Any]) -> dict[str, Any]:
    """setDNSDeploymentAddonDefaults, as the appsv1.DeploymentStrategy RKE passes."""
    given = config.dns.update_strategy
    kind, rolling = given.get("strategy", ""), given.get("rollingUpdate")
    if kind not in ("", "RollingUpdate"):
        return {"type": kind, "rollingUpdate": rolling} if rolling else {"type": kind}
    if rolling is None:
        return {"type": "RollingUpdate", "rollingUpdate": provider["rolling"]}
    strategy: dict[str, Any] = {"type": kind} if kind else {}
    field = provider["default"]
    return {**strategy, "rollingUpdate": {field: provider["rolling"][field], **rolling}}


def dns_options(config: ClusterConfig, name: str) -> dict[str, Any]:
    """CoreDNSOptions or KubeDNSOptions as RKE's deployCoreDNS and deployKubeDNS fill them."""
    provider = PROVIDERS[name]
    dns, kubelet = config.dns, config.services.kubelet
    return {
        "RBACConfig": config.authorization.mode,
        **{field: getattr(config.system_images, key) for field, key in provider["images"].items()},
        "ClusterDomain": kubelet.cluster_domain,
        "ClusterDNSServer": kubelet.cluster_dns_server,
        "ReverseCIDRs": dns.reversecidrs or None,
        "UpstreamNameservers": dns.upstreamnameservers or None,
        "StubDomains": dns.stubdomains or None,
        "NodeSelector": dns.node_selector or None,
        "UpdateStrategy": _dns_strategy(config, provider),
        "LinearAutoscalerParams": _linear(config),
        "Tolerations": tolerations(dns.tolerations),
        **{field: dns.options.get(key, "") for field, key in provider["options"].items()},
    }


def _rev_server(arg: str) -> str:
    """dnsmasq's --rev-server for a reverse CIDR RKE wrote as a domain (`--server=/10.0.0.0/8/...`)."""
    match = re.fullmatch(r"--server=/(\d+\.\d+\.\d+\.\d+/\d+)/(.*)", arg)
    return f"--rev-server={match.group(1)},{match.group(2)}" if match else arg


def with_rke_py_departures(objects: list[kdm.Obj]) -> list[kdm.Obj]:
    """RKE's DNS objects with what rke-py does differently on purpose (README, "Add-ons"): the CoreDNS
    Deployment leaves its replicas to the autoscaler, and reverse CIDRs are zones in the Corefile (not Go's
    printing of a list, `[10.0.0.0/8]`) and dnsmasq's --rev-server for kube-dns."""
    for item in objects:
        if item["kind"] == "Deployment" and item["metadata"]["name"] == "coredns":
            item["spec"].pop("replicas", None)
        if item["kind"] == "Deployment" and item["metadata"]["name"] == "kube-dns":
            dnsmasq = item["spec"]["template"]["spec"]["containers"][1]
            dnsmasq["args"] = [_rev_server(arg) for arg in dnsmasq["args"]]
        if item["kind"] == "ConfigMap" and item["metadata"]["name"] == "coredns":
            corefile = item["data"]["Corefile"]
            item["data"]["Corefile"] = re.sub(r"\[([^]]*)\]", r"\1", corefile)
    return objects


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_kdm_dns_objects_equal_rkes(provider: str, cluster: str, version: str) -> None:
    settings = PROVIDERS[provider]
    options = ", ".join(f"{key}: class-{i}" for i, key in enumerate(settings["options"].values()))
    stub = "  stubdomains: {corp.example.com: [192.0.2.55]}\n" if provider == "kube-dns" else ""
    body = CLUSTERS[cluster].format(provider=provider, options=options, stubdomains=stub)
    config = load_text(f"{NODES}kubernetes_version: {version}\n{body}").config
    kdm_key, addon = settings["kdm"], settings["addon"]
    rke = kdm.render(kdm_key, version, dns_options(config, provider), pointers=("UpdateStrategy",))
    ours = next(a.objects for a in build(config) if a.name == addon)
    assert kdm.differences(with_rke_py_departures(rke), ours) == []


NODELOCAL = {
    "defaults": "dns: {nodelocal: {ip_address: 169.254.20.10}}\n",
    "everything": """
dns:
  nodelocal:
    ip_address: 169.254.20.11
    node_selector: {cache: "yes"}
    update_strategy: {strategy: RollingUpdate, rollingUpdate: {maxUnavailable: 3}}
    node_local_dns_priority_class_name: cache-high
services: {kubelet: {cluster_domain: corp.local, cluster_dns_server: 10.43.0.53}}
""",
}


def nodelocal_options(config: ClusterConfig) -> dict[str, Any]:
    """NodelocalOptions as RKE's deployNodelocal fills them (its update strategy only when given)."""
    nodelocal = config.dns.nodelocal
    assert nodelocal is not None
    given = nodelocal.update_strategy
    strategy = None
    if given:
        strategy = {"type": given["strategy"]} if given.get("strategy") else {}
        strategy |= {"rollingUpdate": given["rollingUpdate"]} if given.get("rollingUpdate") else {}
    return {
        "RBACConfig": config.authorization.mode,
        "NodelocalImage": config.system_images.nodelocal,
        "ClusterDomain": config.services.kubelet.cluster_domain,
        "ClusterDNSServer": config.services.kubelet.cluster_dns_server,
        "IPAddress": nodelocal.ip_address,
        "NodeSelector": nodelocal.node_selector or None,
        "UpdateStrategy": strategy,
        "NodeLocalDNSPriorityClassName": nodelocal.node_local_dns_priority_class_name,
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("cluster", sorted(NODELOCAL))
def test_kdm_nodelocal_objects_equal_rkes(cluster: str, version: str) -> None:
    config = load_text(f"{NODES}kubernetes_version: {version}\n{NODELOCAL[cluster]}").config
    options = nodelocal_options(config)
    pointers = ("UpdateStrategy",) if options["UpdateStrategy"] is not None else ()
    rke = kdm.render("nodelocal", version, options, pointers=pointers)
    ours = next(a.objects for a in build(config) if a.name == "rke-nodelocal-addon")
    assert kdm.differences(rke, ours) == []
