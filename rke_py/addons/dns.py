"""Cluster DNS: CoreDNS (RKE's default) or kube-dns, each with its proportional autoscaler and the Service
at `services.kubelet.cluster_dns_server` (`coredns.py`, `kubedns.py`), and NodeLocal DNSCache when
`dns.nodelocal.ip_address` is set — each as RKE renders KDM's templates (tests/kdm compares them).

Every value written into a Corefile or a dnsmasq flag was checked by the config validator (nameservers,
domains, networks), so no line of it comes from unchecked text.
"""

from __future__ import annotations

from typing import Any

from rke_py.addons import k8s
from rke_py.addons.coredns import DNS_LABELS, coredns
from rke_py.addons.k8s import Obj
from rke_py.addons.kubedns import ADDON_MANAGER, kube_dns
from rke_py.config.schema import ClusterConfig

NODELOCAL = "node-local-dns"
UPSTREAM = "kube-dns-upstream"  # the Service node-cache forwards cluster names to


def objects(config: ClusterConfig) -> list[Obj]:
    provider = config.dns.provider
    if provider == "coredns":
        return coredns(config)
    if provider == "kube-dns":
        return kube_dns(config)
    return []


def nodelocal_corefile(config: ClusterConfig, ip: str) -> str:
    """node-cache's Corefile as RKE's `nodelocal-v1.21` template writes it; node-cache fills in the
    __PILLAR__ names (the kube-dns-upstream Service's address, the node's resolv.conf servers)."""
    domain, service = config.services.kubelet.cluster_domain, config.services.kubelet.cluster_dns_server
    common = ["    errors", "    cache 30", "    reload", "    loop", f"    bind {ip} {service}"]
    to_cluster = [
        "    forward . __PILLAR__CLUSTER__DNS__ {",
        "            force_tcp",
        "    }",
        "    prometheus :9253",
    ]
    blocks = [
        [
            f"{domain}:53 {{",
            "    errors",
            "    cache {",
            "            success 9984 30",
            "            denial 9984 5",
            "    }",
            *common[2:],
            *to_cluster,
            f"    health {ip}:8080",
        ],
        ["in-addr.arpa:53 {", *common, *to_cluster],
        ["ip6.arpa:53 {", *common, *to_cluster],
        [".:53 {", *common, "    forward . __PILLAR__UPSTREAM__SERVERS__", "    prometheus :9253"],
    ]
    return "".join("\n".join([*block, "    }"]) + "\n" for block in blocks)


def nodelocal_objects(config: ClusterConfig) -> list[Obj]:
    """NodeLocal DNSCache: a DaemonSet answering on `ip_address` and on the cluster DNS address on every
    node, forwarding cluster names to the DNS pods through their own Service (node-cache fills in its
    address)."""
    nodelocal = config.dns.nodelocal
    if nodelocal is None or not nodelocal.ip_address or config.dns.provider == "none":
        return []
    ip, service_ip = nodelocal.ip_address, config.services.kubelet.cluster_dns_server
    rbac = config.authorization.mode == "rbac"
    labels = {"k8s-app": NODELOCAL}
    container = k8s.container(
        "node-cache",
        config.system_images.nodelocal,
        resources={"requests": {"cpu": "25m", "memory": "5Mi"}},
        args=[
            "-localip",
            f"{ip},{service_ip}",
            "-conf",
            "/etc/Corefile",
            "-upstreamsvc",
            "kube-dns-upstream",
        ],
        securityContext={"privileged": True},
        ports=[
            {"containerPort": 53, "name": "dns", "protocol": "UDP"},
            {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
            {"containerPort": 9253, "name": "metrics", "protocol": "TCP"},
        ],
        livenessProbe={
            "httpGet": {"host": ip, "path": "/health", "port": 8080},
            "initialDelaySeconds": 60,
            "timeoutSeconds": 5,
        },
        volumeMounts=[
            {"mountPath": "/run/xtables.lock", "name": "xtables-lock", "readOnly": False},
            k8s.mount("config-volume", "/etc/coredns"),
            k8s.mount("kube-dns-config", "/etc/kube-dns"),
        ],
    )
    pod: dict[str, Any] = {
        "priorityClassName": nodelocal.node_local_dns_priority_class_name or "system-node-critical",
        **({"serviceAccountName": NODELOCAL} if rbac else {}),
        "affinity": {"nodeAffinity": k8s.node_affinity(k8s.NOT_WINDOWS_TERM)},
        "hostNetwork": True,
        **({"nodeSelector": dict(nodelocal.node_selector)} if nodelocal.node_selector else {}),
        "dnsPolicy": "Default",
        "tolerations": [{"operator": "Exists"}],
        "containers": [container],
        "volumes": [
            k8s.host_volume("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
            {"name": "kube-dns-config", "configMap": {"name": "kube-dns", "optional": True}},
            {
                "name": "config-volume",
                "configMap": {"name": NODELOCAL, "items": [{"key": "Corefile", "path": "Corefile.base"}]},
            },
        ],
    }
    daemonset = k8s.workload("DaemonSet", NODELOCAL, labels, pod)
    given = nodelocal.update_strategy  # RKE's default when none is given
    daemonset["spec"]["updateStrategy"] = (
        k8s.strategy_fields(given) if given else {"rollingUpdate": {"maxUnavailable": 1}}
    )
    daemonset["metadata"]["labels"].update(ADDON_MANAGER)
    dns_ports = [k8s.port("dns", 53, "UDP", 53), k8s.port("dns-tcp", 53, "TCP", 53)]
    upstream = k8s.service(UPSTREAM, DNS_LABELS, dns_ports)
    upstream["metadata"]["labels"] = {**DNS_LABELS, **ADDON_MANAGER, "kubernetes.io/name": "KubeDNSUpstream"}
    metrics = k8s.service(NODELOCAL, labels, [{"name": "metrics", "port": 9253, "targetPort": 9253}])
    metrics["spec"]["clusterIP"] = "None"  # headless: Prometheus finds each pod
    metrics["metadata"]["labels"] = dict(labels)
    config_map = k8s.config_map(NODELOCAL, {"Corefile": nodelocal_corefile(config, ip)})
    config_map["metadata"]["labels"] = {"addonmanager.kubernetes.io/mode": "Reconcile"}
    account = k8s.service_account(NODELOCAL)
    account["metadata"]["labels"] = dict(ADDON_MANAGER)
    return [*([account] if rbac else []), upstream, config_map, daemonset, metrics]
