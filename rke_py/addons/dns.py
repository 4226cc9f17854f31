"""Cluster DNS: CoreDNS (RKE's default) or kube-dns, each with its proportional autoscaler, the Service at
`services.kubelet.cluster_dns_server`, and NodeLocal DNSCache when `dns.nodelocal.ip_address` is set.

Every value written into a Corefile was checked by the config validator (nameservers, domains, networks),
so no line of it comes from unchecked text. The Deployment's replica count is left to the autoscaler: rke-py
never sets it, so the two do not fight over it.
"""

from __future__ import annotations

import json
from typing import Any

from rke_py.addons import k8s
from rke_py.addons.coredns import DNS_LABELS, coredns, linear_params
from rke_py.addons.k8s import Obj, rule
from rke_py.config.schema import ClusterConfig

NODELOCAL_UPSTREAM = "kube-dns-upstream"


def objects(config: ClusterConfig) -> list[Obj]:
    provider = config.dns.provider
    if provider == "coredns":
        return coredns(config)
    if provider == "kube-dns":
        return kube_dns(config)
    return []


def _autoscaler(config: ClusterConfig, name: str, image: str, target: str) -> list[Obj]:
    rules = [
        rule([""], ["nodes"], ["list", "watch"]),
        rule([""], ["replicationcontrollers/scale"], ["get", "update"]),
        rule(["apps"], ["deployments/scale", "replicasets/scale"], ["get", "update"]),
        rule([""], ["configmaps"], ["get", "create"]),
    ]
    command = [
        "/cluster-proportional-autoscaler",
        "--namespace=kube-system",
        f"--configmap={name}",
        f"--target=Deployment/{target}",
        f"--default-params={linear_params(config)}",
        "--logtostderr=true",
        "--v=2",
    ]
    pod = k8s.pod_spec(
        [
            k8s.container(
                "autoscaler", image, command=command, resources={"requests": {"cpu": "20m", "memory": "10Mi"}}
            )
        ],
        account=name,
        node_selector=config.dns.node_selector,
        tolerations_=k8s.tolerations(config.dns.tolerations, k8s.CRITICAL_TOLERATIONS),
        priority_class="system-cluster-critical",
    )
    return [
        k8s.service_account(name),
        *k8s.bound_role(name, rules, name),
        k8s.workload("Deployment", name, {"k8s-app": name}, pod),
    ]


def _dns_service(
    config: ClusterConfig, name: str = "kube-dns", selector: dict[str, str] = DNS_LABELS, **spec: Any
) -> Obj:
    ports = [k8s.port("dns", 53, "UDP"), k8s.port("dns-tcp", 53, "TCP")]
    service = k8s.service(name, selector, ports, **spec)
    service["metadata"]["labels"] = {
        "k8s-app": "kube-dns",
        "kubernetes.io/name": "CoreDNS" if config.dns.provider == "coredns" else "KubeDNS",
    }
    return service


def kube_dns(config: ClusterConfig) -> list[Obj]:
    dns, images = config.dns, config.system_images
    domain = config.services.kubelet.cluster_domain
    data = {}
    if dns.upstreamnameservers:
        data["upstreamNameservers"] = json.dumps(dns.upstreamnameservers)
    if dns.stubdomains:
        data["stubDomains"] = json.dumps(dns.stubdomains, sort_keys=True)
    volume = k8s.mount("kube-dns-config", "/kube-dns-config")
    containers = [
        k8s.container(
            "kubedns",
            images.kubedns,
            args=[f"--domain={domain}.", "--dns-port=10053", "--config-dir=/kube-dns-config", "--v=2"],
            env=k8s.env(PROMETHEUS_PORT="10055"),
            ports=[
                {"name": "dns-local", "containerPort": 10053, "protocol": "UDP"},
                {"name": "dns-tcp-local", "containerPort": 10053, "protocol": "TCP"},
                {"name": "metrics", "containerPort": 10055, "protocol": "TCP"},
            ],
            readinessProbe={"httpGet": {"path": "/readiness", "port": 8081}, "initialDelaySeconds": 3},
            volumeMounts=[volume],
        ),
        k8s.container(
            "dnsmasq",
            images.dnsmasq,
            args=[
                "-v=2",
                "-logtostderr",
                "-configDir=/etc/k8s/dns/dnsmasq-nanny",
                "-restartDnsmasq=true",
                "--",
                "-k",
                "--cache-size=1000",
                "--log-facility=-",
                f"--server=/{domain}/127.0.0.1#10053",
                "--server=/in-addr.arpa/127.0.0.1#10053",
                "--server=/ip6.arpa/127.0.0.1#10053",
            ],
            ports=[
                {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
            ],
            volumeMounts=[k8s.mount("kube-dns-config", "/etc/k8s/dns/dnsmasq-nanny")],
        ),
        k8s.container(
            "sidecar",
            images.kubedns_sidecar,
            args=[
                "--v=2",
                "--logtostderr",
                f"--probe=kubedns,127.0.0.1:10053,kubernetes.default.svc.{domain},5,SRV",
                f"--probe=dnsmasq,127.0.0.1:53,kubernetes.default.svc.{domain},5,SRV",
            ],
            ports=[{"name": "metrics", "containerPort": 10054, "protocol": "TCP"}],
        ),
    ]
    pod = k8s.pod_spec(
        containers,
        account="kube-dns",
        node_selector=dns.node_selector,
        tolerations_=k8s.tolerations(dns.tolerations, k8s.CRITICAL_TOLERATIONS),
        priority_class="system-cluster-critical",
        dnsPolicy="Default",
        volumes=[{"name": "kube-dns-config", "configMap": {"name": "kube-dns", "optional": True}}],
    )
    return [
        k8s.service_account("kube-dns"),
        k8s.config_map("kube-dns", data),
        k8s.workload("Deployment", "kube-dns", DNS_LABELS, pod, strategy=dns.update_strategy),
        _dns_service(config, clusterIP=config.services.kubelet.cluster_dns_server),
        *_autoscaler(config, "kube-dns-autoscaler", images.kubedns_autoscaler, "kube-dns"),
    ]


def nodelocal_objects(config: ClusterConfig) -> list[Obj]:
    """NodeLocal DNSCache: a DaemonSet answering on `ip_address` on every node, forwarding cluster names to
    the DNS pods through their own Service (node-cache fills in its address)."""
    nodelocal = config.dns.nodelocal
    if nodelocal is None or not nodelocal.ip_address or config.dns.provider == "none":
        return []
    ip, domain = nodelocal.ip_address, config.services.kubelet.cluster_domain
    block = ["    errors", "    cache 30", "    reload", "    loop", f"    bind {ip}"]
    upstream = "__PILLAR__CLUSTER__DNS__"
    text = "\n".join(
        [
            f"{domain}:53 {{",
            *block,
            f"    forward . {upstream} {{",
            "        force_tcp",
            "    }",
            "    prometheus :9253",
            f"    health {ip}:8080",
            "}",
            *[
                line
                for zone in ("in-addr.arpa", "ip6.arpa")
                for line in (
                    f"{zone}:53 {{",
                    *block,
                    f"    forward . {upstream} {{",
                    "        force_tcp",
                    "    }",
                    "    prometheus :9253",
                    "}",
                )
            ],
            ".:53 {",
            *block,
            "    forward . __PILLAR__UPSTREAM__SERVERS__",
            "    prometheus :9253",
            "}",
        ]
    )
    labels = {"k8s-app": "node-local-dns"}
    container = k8s.container(
        "node-cache",
        config.system_images.nodelocal,
        args=["-localip", ip, "-conf", "/etc/Corefile", "-upstreamsvc", NODELOCAL_UPSTREAM],
        resources={"requests": {"cpu": "25m", "memory": "5Mi"}},
        securityContext={"capabilities": {"add": ["NET_ADMIN"]}},
        ports=[
            {"name": "dns", "containerPort": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9253, "protocol": "TCP"},
        ],
        livenessProbe={"httpGet": {"host": ip, "path": "/health", "port": 8080}, "initialDelaySeconds": 60},
        volumeMounts=[
            k8s.mount("xtables-lock", "/run/xtables.lock"),
            k8s.mount("config-volume", "/etc/coredns"),
            k8s.mount("kube-dns-config", "/etc/kube-dns"),
        ],
    )
    pod = k8s.pod_spec(
        [container],
        account="node-local-dns",
        node_selector=nodelocal.node_selector,
        tolerations_=k8s.CRITICAL_TOLERATIONS,
        priority_class=nodelocal.node_local_dns_priority_class_name or "system-node-critical",
        hostNetwork=True,
        dnsPolicy="Default",
        volumes=[
            k8s.host_volume("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
            {"name": "kube-dns-config", "configMap": {"name": "kube-dns", "optional": True}},
            {
                "name": "config-volume",
                "configMap": {
                    "name": "node-local-dns",
                    "items": [{"key": "Corefile", "path": "Corefile.base"}],
                },
            },
        ],
    )
    return [
        k8s.service_account("node-local-dns"),
        _dns_service(config, NODELOCAL_UPSTREAM),
        k8s.config_map("node-local-dns", {"Corefile": text + "\n"}),
        k8s.workload("DaemonSet", "node-local-dns", labels, pod, strategy=nodelocal.update_strategy),
    ]
