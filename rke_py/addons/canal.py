"""canal, RKE's default network plugin: calico's policy over flannel's VXLAN, object for object as RKE
renders KDM's canal templates v3.26.1 to v3.28.1 (tests/kdm compares them), but for the CRDs' schemas.

As in RKE, flannel here keeps VXLAN's default VNI and port, calico-node tolerates every taint, and
`network.tolerations` go to calico-kube-controllers.
"""

from __future__ import annotations

from typing import Any

from rke_py.addons import calico, k8s
from rke_py.addons.k8s import Obj, rule
from rke_py.config.schema import ClusterConfig

HOST_LOCAL_IPAM = '"type": "host-local",\n          "subnet": "usePodCidr"'
CALICO_ENV = {  # calico-node's settings when flannel routes
    "CALICO_NETWORKING_BACKEND": "none",
    "CLUSTER_TYPE": "k8s,canal",
    "FELIX_IPTABLESREFRESHINTERVAL": "60",
    "IP": "",
    "CALICO_DISABLE_FILE_LOGGING": "true",
    "FELIX_DEFAULTENDPOINTTOHOSTACTION": "ACCEPT",
    "FELIX_IPV6SUPPORT": "false",
}


def _config_map(config: ClusterConfig) -> Obj:
    cidr = config.services.kube_controller.cluster_cidr.split(",")[0]
    backend = config.network.options.get("canal_flannel_backend_type", "")
    net_conf = f'{{\n  "Network": "{cidr}",\n  "Backend": {{\n    "Type": "{backend}"\n  }}\n}}\n'
    data = {
        "typha_service_name": "none",
        "canal_iface": config.network.options.get("canal_iface", ""),
        "masquerade": "true",
        "veth_mtu": str(config.network.mtu or 1450),
        "cni_network_config": calico.cni_conf(HOST_LOCAL_IPAM),
        "net-conf.json": net_conf,
    }
    return k8s.config_map("canal-config", data)


def _pod(config: ClusterConfig) -> dict[str, Any]:
    images = config.system_images
    cni_account = k8s.field_env("CALICO_CNI_SERVICE_ACCOUNT", "spec.serviceAccountName")
    env = [
        *k8s.env(DATASTORE_TYPE="kubernetes", USE_POD_CIDR="true", WAIT_FOR_DATASTORE="true"),
        k8s.field_env("NODENAME", "spec.nodeName"),
        cni_account,
        *({"name": k, "value": v} for k, v in CALICO_ENV.items()),
    ]
    flanneld = {
        "name": "kube-flannel",
        "image": images.canal_flannel,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/opt/bin/flanneld", "--ip-masq", "--kube-subnet-mgr"],
        "securityContext": {"privileged": True},
        "env": [
            k8s.field_env("POD_NAME", "metadata.name"),
            k8s.field_env("POD_NAMESPACE", "metadata.namespace"),
            k8s.config_env("FLANNELD_IFACE", "canal-config", "canal_iface"),
            k8s.config_env("FLANNELD_IP_MASQ", "canal-config", "masquerade"),
        ],
        "volumeMounts": [
            {**k8s.mount("xtables-lock", "/run/xtables.lock"), "readOnly": False},
            k8s.mount("flannel-cfg", "/etc/kube-flannel/"),
        ],
    }
    containers = {
        "initContainers": [
            calico.install_cni(images.canal_cni, "10-canal.conflist", "canal-config", [cni_account]),
            calico.mount_bpffs(images.canal_node),
        ],
        "containers": [calico.node_container(images.canal_node, env, ()), flanneld],
        "volumes": calico.node_volumes(
            config, [{"name": "flannel-cfg", "configMap": {"name": "canal-config"}}], []
        ),
    }
    return calico.node_pod(config, "canal", "canal_priority_class_name", containers)


def objects(config: ClusterConfig) -> list[Obj]:
    rbac = config.authorization.mode == "rbac"
    canal_sa = [k8s.sa_subject("canal")]
    flannel_rules = [
        rule([""], ["pods"], ["get"]),
        rule([""], ["nodes"], ["list", "watch"]),
        rule([""], ["nodes/status"], ["patch"]),
    ]
    roles = [
        *k8s.bound_role(calico.KUBE_CONTROLLERS, calico.kube_controllers_rules(), calico.KUBE_CONTROLLERS),
        k8s.cluster_role("calico", calico.node_rules(["canal", calico.CNI_ACCOUNT])),
        k8s.cluster_role(calico.CNI_ACCOUNT, calico.cni_plugin_rules(ipam=False)),
        k8s.cluster_role("flannel", flannel_rules),
        k8s.cluster_role_binding("canal-flannel", "flannel", canal_sa),
        k8s.cluster_role_binding("canal-calico", "calico", canal_sa),
    ]
    accounts = [k8s.service_account("canal"), k8s.service_account(calico.CNI_ACCOUNT)]
    cni_binding = k8s.cluster_role_binding(
        calico.CNI_ACCOUNT, calico.CNI_ACCOUNT, [k8s.sa_subject(calico.CNI_ACCOUNT)]
    )
    return [
        _config_map(config),
        *calico.crds(),
        *(roles if rbac else []),
        cni_binding,
        calico.node_daemonset(config, "canal", _pod(config), {}),
        *(accounts if rbac else []),
        *calico.kube_controllers(
            config, config.system_images.canal_controllers, calico.CRITICAL_TOLERATIONS, {}
        ),
    ]
