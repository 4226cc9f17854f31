"""kube-dns (kubedns, dnsmasq-nanny, sidecar) and its proportional autoscaler, object for object as RKE
renders KDM's template `kubedns-v1.16` (tests/kdm compares them when given a KDM checkout).

Where rke-py departs from RKE, on purpose: each reverse CIDR is given to dnsmasq as `--rev-server`
(RKE writes `--server=/10.0.0.0/8/...`, which dnsmasq reads as the domains `10.0.0.0` and `8`). The README
lists it.
"""

from __future__ import annotations

import json
from typing import Any

from rke_py.addons import k8s
from rke_py.addons.coredns import DNS_ANTI_AFFINITY, DNS_LABELS, DNS_TOLERATIONS, linear_params
from rke_py.addons.k8s import Obj, rule
from rke_py.config.schema import DNS_OPTIONS, ClusterConfig

AUTOSCALER = "kube-dns-autoscaler"
ROLLING = {"maxUnavailable": 0, "maxSurge": "10%"}  # RKE's rolling update for kube-dns
PRIORITY_OPTION, AUTOSCALER_PRIORITY_OPTION = DNS_OPTIONS["kube-dns"]
ADDON_MANAGER = {"kubernetes.io/cluster-service": "true", "addonmanager.kubernetes.io/mode": "Reconcile"}
HEALTH = 10054  # the sidecar's port: its /metrics and the others' health checks


def _liveness(path: str) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": HEALTH, "scheme": "HTTP"},
        "initialDelaySeconds": 60,
        "timeoutSeconds": 5,
        "successThreshold": 1,
        "failureThreshold": 5,
    }


def _config_data(config: ClusterConfig) -> dict[str, str]:
    """The ConfigMap's keys as RKE's template writes them: block scalars, each but the last (which ends
    the template) keeping its newline."""
    dns, data = config.dns, {}
    if dns.upstreamnameservers:
        data["upstreamNameservers"] = "[" + ", ".join(json.dumps(s) for s in dns.upstreamnameservers) + "]"
    if dns.stubdomains:
        data["stubDomains"] = json.dumps(dns.stubdomains, separators=(",", ":"), sort_keys=True)
    keys = list(data)
    return {key: value + ("\n" if key != keys[-1] else "") for key, value in data.items()}


def kube_dns(config: ClusterConfig) -> list[Obj]:
    dns, images = config.dns, config.system_images
    domain = config.services.kubelet.cluster_domain
    rbac = config.authorization.mode == "rbac"
    local = "127.0.0.1#10053"
    reverse = [f"--rev-server={cidr},{local}" for cidr in dns.reversecidrs] or [
        f"--server=/in-addr.arpa/{local}",
        f"--server=/ip6.arpa/{local}",
    ]
    probe = f"kubernetes.default.svc.{domain},5,A"
    containers = [
        k8s.container(
            "kubedns",
            images.kubedns,
            resources={"limits": {"memory": "170Mi"}, "requests": {"cpu": "100m", "memory": "70Mi"}},
            livenessProbe=_liveness("/healthcheck/kubedns"),
            readinessProbe={
                "httpGet": {"path": "/readiness", "port": 8081, "scheme": "HTTP"},
                "initialDelaySeconds": 3,
                "timeoutSeconds": 5,
            },
            args=[f"--domain={domain}.", "--dns-port=10053", "--config-dir=/kube-dns-config", "--v=2"],
            env=k8s.env(PROMETHEUS_PORT="10055"),
            ports=[
                {"containerPort": 10053, "name": "dns-local", "protocol": "UDP"},
                {"containerPort": 10053, "name": "dns-tcp-local", "protocol": "TCP"},
                {"containerPort": 10055, "name": "metrics", "protocol": "TCP"},
            ],
            volumeMounts=[k8s.mount("kube-dns-config", "/kube-dns-config")],
        ),
        k8s.container(
            "dnsmasq",
            images.dnsmasq,
            livenessProbe=_liveness("/healthcheck/dnsmasq"),
            args=[
                "-v=2",
                "-logtostderr",
                "-configDir=/etc/k8s/dns/dnsmasq-nanny",
                "-restartDnsmasq=true",
                "--",
                "-k",
                "--cache-size=1000",
                "--log-facility=-",
                f"--server=/{domain}/{local}",
                *reverse,
            ],
            ports=[
                {"containerPort": 53, "name": "dns", "protocol": "UDP"},
                {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
            ],
            resources={"requests": {"cpu": "150m", "memory": "20Mi"}},
            volumeMounts=[k8s.mount("kube-dns-config", "/etc/k8s/dns/dnsmasq-nanny")],
        ),
        k8s.container(
            "sidecar",
            images.kubedns_sidecar,
            livenessProbe=_liveness("/metrics"),
            args=[
                "--v=2",
                "--logtostderr",
                f"--probe=kubedns,127.0.0.1:10053,{probe}",
                f"--probe=dnsmasq,127.0.0.1:53,{probe}",
            ],
            ports=[{"containerPort": HEALTH, "name": "metrics", "protocol": "TCP"}],
            resources={"requests": {"memory": "20Mi", "cpu": "10m"}},
        ),
    ]
    priority = dns.options.get(PRIORITY_OPTION, "")
    pod: dict[str, Any] = {
        **({"priorityClassName": priority} if priority else {}),
        **({"nodeSelector": dict(dns.node_selector)} if dns.node_selector else {}),
        "affinity": {"podAntiAffinity": DNS_ANTI_AFFINITY, "nodeAffinity": k8s.LINUX_WORKER_AFFINITY},
        "tolerations": k8s.tolerations(dns.tolerations, DNS_TOLERATIONS),
        "volumes": [{"name": "kube-dns-config", "configMap": {"name": "kube-dns", "optional": True}}],
        "containers": containers,
        "dnsPolicy": "Default",
        **({"serviceAccountName": "kube-dns"} if rbac else {}),
    }
    deployment = k8s.workload(
        "Deployment",
        "kube-dns",
        DNS_LABELS,
        pod,
        pod_annotations={"scheduler.alpha.kubernetes.io/critical-pod": ""},
    )
    deployment["spec"]["strategy"] = k8s.deployment_strategy(dns.update_strategy, ROLLING, ("maxSurge",))
    deployment["metadata"]["labels"].update(ADDON_MANAGER)
    ports = [k8s.port("dns", 53, "UDP"), k8s.port("dns-tcp", 53, "TCP")]
    service = k8s.service("kube-dns", DNS_LABELS, ports, clusterIP=config.services.kubelet.cluster_dns_server)
    service["metadata"]["labels"] = {"k8s-app": "kube-dns", **ADDON_MANAGER, "kubernetes.io/name": "KubeDNS"}
    config_map = k8s.obj("v1", "ConfigMap", "kube-dns", k8s.SYSTEM)
    if data := _config_data(config):
        config_map["data"] = data
    return [
        *([_addon_managed(k8s.service_account("kube-dns"))] if rbac else []),
        config_map,
        deployment,
        service,
        *_autoscaler(config, rbac),
    ]


def _addon_managed(item: Obj) -> Obj:
    item["metadata"]["labels"] = dict(ADDON_MANAGER)
    return item


def _autoscaler(config: ClusterConfig, rbac: bool) -> list[Obj]:
    rules = [
        rule([""], ["nodes"], ["list", "watch"]),
        rule([""], ["replicationcontrollers/scale"], ["get", "update"]),
        rule(["extensions", "apps"], ["deployments/scale", "replicasets/scale"], ["get", "update"]),
        rule([""], ["configmaps"], ["get", "create"]),
    ]
    container = k8s.container(
        "autoscaler",
        config.system_images.kubedns_autoscaler,
        resources={"requests": {"cpu": "20m", "memory": "10Mi"}},
        command=[
            "/cluster-proportional-autoscaler",
            "--namespace=kube-system",
            f"--configmap={AUTOSCALER}",
            "--target=Deployment/kube-dns",
            f"--default-params={linear_params(config)}",
            "--logtostderr=true",
            "--v=2",
        ],
    )
    priority = config.dns.options.get(AUTOSCALER_PRIORITY_OPTION, "")
    pod: dict[str, Any] = {
        "affinity": {"nodeAffinity": k8s.LINUX_WORKER_AFFINITY},
        **({"serviceAccountName": AUTOSCALER} if rbac else {}),
        **({"priorityClassName": priority} if priority else {}),
        "tolerations": k8s.tolerations(config.dns.tolerations, k8s.TOLERATE_ALL),
        "containers": [container],
    }
    rbac_objects = [
        _addon_managed(k8s.service_account(AUTOSCALER)),
        *k8s.bound_role(f"system:{AUTOSCALER}", rules, AUTOSCALER),
    ]
    return [
        *(rbac_objects if rbac else []),
        k8s.workload("Deployment", AUTOSCALER, {"k8s-app": AUTOSCALER}, pod),
    ]
