"""Cluster DNS: CoreDNS (RKE's default) or kube-dns, each with its proportional autoscaler, the Service at
`services.kubelet.cluster_dns_server`, and NodeLocal DNSCache when `dns.nodelocal.ip_address` is set.

Every value written into a Corefile was checked by the config validator (nameservers, domains, networks),
so no line of it comes from unchecked text. The Deployment's replica count is left to the autoscaler: rke-py
never sets it, so the two do not fight over it.
"""

from __future__ import annotations

from typing import Any

from rke_py.addons import k8s
from rke_py.addons.coredns import DNS_LABELS, coredns
from rke_py.addons.k8s import Obj
from rke_py.addons.kubedns import kube_dns
from rke_py.config.schema import ClusterConfig

NODELOCAL_UPSTREAM = "kube-dns-upstream"


def objects(config: ClusterConfig) -> list[Obj]:
    provider = config.dns.provider
    if provider == "coredns":
        return coredns(config)
    if provider == "kube-dns":
        return kube_dns(config)
    return []


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
