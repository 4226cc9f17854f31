"""CoreDNS and its proportional autoscaler, object for object as RKE renders KDM's templates
`coredns-v1.8.3-rancher2` and `-rancher3` (tests/kdm compares them when given a KDM checkout).

Where rke-py departs from RKE, on purpose: stub domains get a server block each (RKE's CoreDNS template
drops `dns.stubdomains`), reverse CIDRs are written as zones (RKE prints Go's `[a b]` into the
Corefile), and the Deployment has no `replicas` (the rancher2 template's `replicas: 1` fights the
autoscaler on every `up`). The README lists these.
"""

from __future__ import annotations

import json
from typing import Any

from rke_py.addons import k8s
from rke_py.addons.k8s import Obj, rule
from rke_py.config.kdm import version_key
from rke_py.config.schema import DNS_OPTIONS, ClusterConfig

DNS_LABELS = {"k8s-app": "kube-dns"}  # the Service selects both providers' pods by it
AUTOSCALER = "coredns-autoscaler"
ROLLING = {"maxUnavailable": 1, "maxSurge": 0}  # RKE's rolling update for CoreDNS
PRIORITY_OPTION, AUTOSCALER_PRIORITY_OPTION = DNS_OPTIONS["coredns"]
# KDM serves `coredns-v1.8.3-rancher3` from these versions on (v1.27 from .13, v1.28 from .9), rancher2
# before; rancher3 selects nodes by `kubernetes.io/os`, rancher2 by the beta label.
RANCHER3_FROM = ((1, 27, 13), (1, 28, 9))
# Both providers' pods: CriticalAddonsOnly and every taint, and one pod per node where there are enough.
DNS_TOLERATIONS = [{"key": "CriticalAddonsOnly", "operator": "Exists"}, *k8s.TOLERATE_ALL]
DNS_ANTI_AFFINITY: dict[str, Any] = {
    "preferredDuringSchedulingIgnoredDuringExecution": [
        {
            "weight": 100,
            "podAffinityTerm": {
                "labelSelector": {
                    "matchExpressions": [{"key": "k8s-app", "operator": "In", "values": ["kube-dns"]}]
                },
                "topologyKey": "kubernetes.io/hostname",
            },
        }
    ]
}
WORKER_AFFINITY = {"nodeAffinity": k8s.node_affinity(k8s.WORKER_TERM)}


def _rancher3(config: ClusterConfig) -> bool:
    version = version_key(config.kubernetes_version)[:3]
    old_line, new_line = RANCHER3_FROM
    return version >= new_line or old_line <= version < (old_line[0], old_line[1] + 1, 0)


def _os_label(config: ClusterConfig) -> str:
    return "kubernetes.io/os" if _rancher3(config) else "beta.kubernetes.io/os"


def corefile(config: ClusterConfig) -> str:
    dns, domain = config.dns, config.services.kubelet.cluster_domain
    reverse = " ".join(dns.reversecidrs) or "in-addr.arpa ip6.arpa"
    forward = " ".join(dns.upstreamnameservers) or '"/etc/resolv.conf"'
    lines = [
        ".:53 {",
        "    errors",
        "    health {",
        "      lameduck 5s",
        "    }",
        "    ready",
        f"    kubernetes {domain} {reverse} {{",
        "      pods insecure",
        "      fallthrough in-addr.arpa ip6.arpa",
        "    }",
        "    prometheus :9153",
        f"    forward . {forward}",
        "    cache 30",
        "    loop",
        "    reload",
        "    loadbalance",
        "} # STUBDOMAINS - Rancher specific change",
    ]
    for domain_name, servers in sorted(dns.stubdomains.items()):
        lines += [
            f"{domain_name}:53 {{",
            "    errors",
            "    cache 30",
            f"    forward . {' '.join(servers)}",
            "}",
        ]
    return "\n".join(lines) + "\n"


def linear_params(config: ClusterConfig) -> str:
    """The autoscaler's --default-params as RKE writes them for either provider: json.Marshal of its
    LinearAutoscalerParams (field order, zero fields left out)."""
    params = config.dns.linear_autoscaler_params
    assert params is not None  # filled by the defaults
    fields = {
        "coresPerReplica": params.cores_per_replica,
        "nodesPerReplica": params.nodes_per_replica,
        "min": params.min,
        "max": params.max,
        "preventSinglePointFailure": params.prevent_single_point_failure,
    }
    linear = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in fields.items() if v}
    return json.dumps({"linear": linear}, separators=(",", ":"))  # Go writes 64.0 as 64


def coredns(config: ClusterConfig) -> list[Obj]:
    dns, os_label = config.dns, _os_label(config)
    rbac = config.authorization.mode == "rbac"
    rules = [
        rule([""], ["endpoints", "services", "pods", "namespaces"], ["list", "watch"]),
        rule(["discovery.k8s.io"], ["endpointslices"], ["list", "watch"]),
    ]
    security: dict[str, Any] = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["all"]},
        "readOnlyRootFilesystem": True,
    }
    if _rancher3(config):
        security["seccompProfile"] = {"type": "RuntimeDefault"}
    container = k8s.container(
        "coredns",
        config.system_images.coredns,
        imagePullPolicy="IfNotPresent",
        resources={"limits": {"memory": "170Mi"}, "requests": {"cpu": "100m", "memory": "70Mi"}},
        args=["-conf", "/etc/coredns/Corefile"],
        volumeMounts=[k8s.mount("config-volume", "/etc/coredns", read_only=True)],
        ports=[
            {"containerPort": 53, "name": "dns", "protocol": "UDP"},
            {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
            {"containerPort": 9153, "name": "metrics", "protocol": "TCP"},
        ],
        livenessProbe={
            "httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 60,
            "timeoutSeconds": 5,
            "successThreshold": 1,
            "failureThreshold": 5,
        },
        readinessProbe={"httpGet": {"path": "/ready", "port": 8181, "scheme": "HTTP"}},
        securityContext=security,
    )
    pod: dict[str, Any] = {
        "priorityClassName": dns.options.get(PRIORITY_OPTION) or "system-cluster-critical",
        **({"serviceAccountName": "coredns"} if rbac else {}),
        "tolerations": k8s.tolerations(dns.tolerations, DNS_TOLERATIONS),
        "nodeSelector": {os_label: "linux", **dns.node_selector},
        "affinity": {**WORKER_AFFINITY, "podAntiAffinity": DNS_ANTI_AFFINITY},
        "containers": [container],
        "dnsPolicy": "Default",
        "volumes": [
            {
                "name": "config-volume",
                "configMap": {"name": "coredns", "items": [{"key": "Corefile", "path": "Corefile"}]},
            }
        ],
    }
    deployment = k8s.workload(
        "Deployment",
        "coredns",
        DNS_LABELS,
        pod,
        pod_annotations={"seccomp.security.alpha.kubernetes.io/pod": "docker/default"},
    )
    deployment["spec"]["strategy"] = k8s.deployment_strategy(
        dns.update_strategy, ROLLING, ("maxUnavailable",)
    )
    deployment["metadata"]["labels"]["kubernetes.io/name"] = "CoreDNS"
    ports = [k8s.port("dns", 53, "UDP"), k8s.port("dns-tcp", 53, "TCP"), k8s.port("metrics", 9153)]
    service = k8s.service("kube-dns", DNS_LABELS, ports, clusterIP=config.services.kubelet.cluster_dns_server)
    service["metadata"]["labels"] = {
        "k8s-app": "kube-dns",
        "kubernetes.io/cluster-service": "true",
        "kubernetes.io/name": "CoreDNS",
    }
    service["metadata"]["annotations"] = {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}
    rbac_objects = [
        k8s.service_account("coredns"),
        *_bootstrapping(k8s.bound_role("system:coredns", rules, "coredns")),
    ]
    return [
        *(rbac_objects if rbac else []),
        k8s.config_map("coredns", {"Corefile": corefile(config)}),
        deployment,
        service,
        *_autoscaler(config, rbac),
    ]


def _bootstrapping(objects: list[Obj]) -> list[Obj]:
    """RKE's system:coredns role and binding carry the labels of Kubernetes' own bootstrap RBAC."""
    for item in objects:
        item["metadata"]["labels"] = {"kubernetes.io/bootstrapping": "rbac-defaults"}
        if item["kind"] == "ClusterRoleBinding":
            item["metadata"]["annotations"] = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
    return objects


def _autoscaler(config: ClusterConfig, rbac: bool) -> list[Obj]:
    os_label = _os_label(config)
    rules = [
        rule([""], ["nodes"], ["list", "watch"]),
        rule([""], ["replicationcontrollers/scale"], ["get", "update"]),
        rule(["extensions", "apps"], ["deployments/scale", "replicasets/scale"], ["get", "update"]),
        rule([""], ["configmaps"], ["get", "create"]),
    ]
    health = {"path": "/healthz", "port": 8080, "scheme": "HTTP"}
    container = k8s.container(
        "autoscaler",
        config.system_images.coredns_autoscaler,
        resources={"requests": {"cpu": "20m", "memory": "10Mi"}},
        livenessProbe={
            "failureThreshold": 5,
            "httpGet": health,
            "initialDelaySeconds": 60,
            "periodSeconds": 10,
            "successThreshold": 1,
            "timeoutSeconds": 5,
        },
        readinessProbe={
            "failureThreshold": 3,
            "httpGet": health,
            "periodSeconds": 10,
            "successThreshold": 1,
            "timeoutSeconds": 1,
        },
        command=[
            "/cluster-proportional-autoscaler",
            "--namespace=kube-system",
            f"--configmap={AUTOSCALER}",
            "--target=Deployment/coredns",
            f"--default-params={linear_params(config)}",
            f"--nodelabels=node-role.kubernetes.io/worker=true,{os_label}=linux",
            "--logtostderr=true",
            "--v=2",
        ],
    )
    rbac_objects = [
        k8s.service_account(AUTOSCALER),
        *k8s.bound_role(f"system:{AUTOSCALER}", rules, AUTOSCALER),
    ]
    priority = config.dns.options.get(AUTOSCALER_PRIORITY_OPTION, "")
    pod: dict[str, Any] = {
        **({"serviceAccountName": AUTOSCALER} if rbac else {}),
        **({"priorityClassName": priority} if priority else {}),
        "nodeSelector": {os_label: "linux"},
        "affinity": WORKER_AFFINITY,
        "tolerations": k8s.tolerations(config.dns.tolerations, k8s.TOLERATE_ALL),
        "containers": [container],
    }
    return [
        *(rbac_objects if rbac else []),
        k8s.workload("Deployment", AUTOSCALER, {"k8s-app": AUTOSCALER}, pod),
    ]
