"""flannel, object for object as RKE renders KDM's flannel templates (tests/kdm compares them). As in RKE
it tolerates every taint; `network.tolerations` are not used.
"""

from __future__ import annotations

from rke_py.addons import k8s
from rke_py.addons.k8s import CNI_BIN, CNI_NET, READ, Obj, rule
from rke_py.config.kdm import version_key
from rke_py.config.schema import ClusterConfig

# KDM's flannel templates for the lines rke-py carries: v0.21.4 before v1.28.6, v0.24.2 (labels on its
# RBAC objects and ConfigMap), v0.25.1 from v1.29 (nftables off in net-conf.json, no clustercidrs rule)
V0_24_FROM, V0_25_FROM = "v1.28.6-rancher1-1", "v1.29.0-rancher1-1"
CNI_CONF = """{
  "name": "cbr0",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "flannel",
      "delegate": {
        "forceAddress": true,
        "hairpinMode": true,
        "isDefaultGateway": true
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      }
    }
  ]
}
"""


def _net_conf(config: ClusterConfig, nftables_key: bool) -> str:
    """net-conf.json as RKE's template writes it: the pod network, then the backend from network.options."""
    network, options = config.services.kube_controller.cluster_cidr.split(",")[0], config.network.options
    lines = ["{", f'  "Network": "{network}",']
    if nftables_key:
        lines.append('  "EnableNFTables": false,')
    lines += [
        '  "Backend": {',
        f'    "Type": "{options.get("flannel_backend_type", "")}",',
        f'    "VNI": {int(options.get("flannel_backend_vni") or 1)},',
        f'    "Port": {int(options.get("flannel_backend_port") or 8472)}',
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def objects(config: ClusterConfig) -> list[Obj]:
    """Object for object as RKE renders KDM's `flannel-v0.21.4`, `-v0.24.2` and `-v0.25.1` (tests/kdm)."""
    images, network, version = config.system_images, config.network, version_key(config.kubernetes_version)
    v0_24 = version >= version_key(V0_24_FROM)
    labels = {"tier": "node", "k8s-app": "flannel"}
    install = {
        "name": "install-cni",
        "image": images.flannel_cni,
        "command": ["/install-cni.sh"],
        "env": [
            k8s.config_env("CNI_NETWORK_CONFIG", "kube-flannel-cfg", "cni-conf.json"),
            {"name": "CNI_CONF_NAME", "value": "10-flannel.conflist"},
        ],
        "volumeMounts": [
            k8s.mount("cni", "/host/etc/cni/net.d"),
            k8s.mount("host-cni-bin", "/host/opt/cni/bin/"),
        ],
    }
    flanneld = {
        "name": "kube-flannel",
        "image": images.flannel,
        "command": ["/opt/bin/flanneld"],
        "args": [
            "--ip-masq",
            "--kube-subnet-mgr",
            *([f"--iface={iface}"] if (iface := config.network.options.get("flannel_iface", "")) else []),
        ],
        "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
        "securityContext": {
            "seLinuxOptions": {"type": "rke_network_t"},
            "privileged": False,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]},
        },
        "env": [
            k8s.field_env("POD_NAME", "metadata.name"),
            k8s.field_env("POD_NAMESPACE", "metadata.namespace"),
            {"name": "EVENT_QUEUE_DEPTH", "value": "5000"},
        ],
        "volumeMounts": [
            k8s.mount("run", "/run/flannel"),
            k8s.mount("flannel-cfg", "/etc/kube-flannel/"),
            k8s.mount("xtables-lock", "/run/xtables.lock"),
        ],
    }
    linux = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
    pod = {
        "affinity": {"nodeAffinity": k8s.node_affinity(linux)},
        **({"nodeSelector": dict(network.node_selector)} if network.node_selector else {}),
        "hostNetwork": True,
        "priorityClassName": network.options.get("kube_flannel_priority_class_name")
        or "system-node-critical",
        "tolerations": [
            {"operator": "Exists", "effect": "NoSchedule"},
            {"operator": "Exists", "effect": "NoExecute"},
        ],
        "serviceAccountName": "flannel",
        "containers": [install, flanneld],
        "volumes": [
            k8s.host_volume("run", "/run/flannel"),
            k8s.host_volume("host-cni-bin", CNI_BIN),
            k8s.host_volume("cni", CNI_NET),
            {"name": "flannel-cfg", "configMap": {"name": "kube-flannel-cfg"}},
            k8s.host_volume("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
        ],
    }
    spec = {
        "selector": {"matchLabels": {"k8s-app": "flannel"}},
        "template": {"metadata": {"labels": dict(labels)}, "spec": pod},
        "updateStrategy": k8s.daemonset_strategy(network.update_strategy),
    }
    daemonset = k8s.obj("apps/v1", "DaemonSet", "kube-flannel", k8s.SYSTEM, spec=spec)
    daemonset["metadata"]["labels"] = dict(labels)
    v0_25 = version >= version_key(V0_25_FROM)
    rules = [
        rule([""], ["pods"], ["get"]),
        rule([""], ["nodes"], READ),
        rule([""], ["nodes/status"], ["patch"]),
    ]
    if not v0_25:
        rules.append(rule(["networking.k8s.io"], ["clustercidrs"], ["list", "watch"]))
    rbac = [
        k8s.cluster_role("flannel", rules),
        k8s.cluster_role_binding("flannel", "flannel", [k8s.sa_subject("flannel")]),
        k8s.service_account("flannel"),
    ]
    if v0_24:
        for item in rbac:
            item["metadata"]["labels"] = {"k8s-app": "flannel"}
    net_conf = _net_conf(config, nftables_key=v0_25)
    config_map = k8s.config_map("kube-flannel-cfg", {"cni-conf.json": CNI_CONF, "net-conf.json": net_conf})
    config_map["metadata"]["labels"] = {**(labels if v0_24 else {"tier": "node"}), "app": "flannel"}
    return [*(rbac if config.authorization.mode == "rbac" else []), config_map, daemonset]
