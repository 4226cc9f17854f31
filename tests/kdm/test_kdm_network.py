"""rke-py's network plugin objects against RKE's own rendering of KDM's templates, for every Kubernetes
version rke-py carries. RKE's inputs (cluster/network.go, do<Plugin>Deploy) are built here as RKE builds
them, with RKE's defaults (setDaemonsetAddonDefaults, the network options' defaults)."""

from __future__ import annotations

from typing import Any

import pytest

from rke_py.addons import build
from rke_py.config import load_text
from rke_py.config.schema import ClusterConfig
from tests.kdm import kdm
from tests.kdm.test_kdm_dns import NODES, VERSIONS, tolerations
from tests.kdm.test_kdm_ingress import daemonset_strategy

pytestmark = pytest.mark.kdm

CLUSTERS = {
    "flannel_defaults": "network: {plugin: flannel}\n",
    "flannel_everything": """
authorization: {mode: none}
network:
  plugin: flannel
  options:
    flannel_iface: eth1
    flannel_backend_type: host-gw
    flannel_backend_vni: "4"
    flannel_backend_port: "8473"
    kube_flannel_priority_class_name: network-high
  node_selector: {network: "yes"}
  update_strategy: {strategy: RollingUpdate, rollingUpdate: {maxUnavailable: 3}}
services:
  kube-controller: {cluster_cidr: 10.50.0.0/16}
  kube-api: {extra_args: {admission-control-config-file: /etc/kubernetes/own.yaml}}
""",
    "flannel_on_delete": "network: {plugin: flannel, update_strategy: {strategy: OnDelete}}\n",
    "canal_defaults": "",
    "canal_everything": """
network:
  plugin: canal
  mtu: 1400
  options:
    canal_iface: eth1
    canal_flannel_backend_type: host-gw
    canal_priority_class_name: network-high
    calico_kube_controllers_priority_class_name: controllers-high
  node_selector: {network: "yes"}
  tolerations: [{key: dedicated, operator: Equal, value: network, effect: NoSchedule}]
  update_strategy: {strategy: RollingUpdate, rollingUpdate: {maxUnavailable: 3}}
""",
    "canal_without_rbac": "authorization: {mode: none}\n"
    + kdm.OWN_ADMISSION
    + "network: {update_strategy: {strategy: OnDelete}}\n",
    "calico_defaults": "network: {plugin: calico}\n",
    "calico_everything": """
network:
  plugin: calico
  mtu: 1400
  options:
    calico_node_priority_class_name: network-high
    calico_kube_controllers_priority_class_name: controllers-high
  node_selector: {network: "yes"}
  tolerations: [{key: dedicated, operator: Equal, value: network, effect: NoSchedule}]
  update_strategy: {strategy: RollingUpdate, rollingUpdate: {maxUnavailable: 3}}
""",
    "calico_dual_stack_without_rbac": """
authorization: {mode: none}
network: {plugin: calico}
services:
  kube-controller:
    cluster_cidr: 10.42.0.0/16,fd00:42::/56
    service_cluster_ip_range: 10.43.0.0/16,fd00:43::/112
  kube-api:
    service_cluster_ip_range: "10.43.0.0/16,fd00:43::/112"
    extra_args: {admission-control-config-file: /etc/kubernetes/own.yaml}
""",
}
KUBE_NODE = "/etc/kubernetes/ssl/kube-node"  # RKE's pki paths of the node identity canal and calico use


def _backend(options: dict[str, str], prefix: str) -> dict[str, Any]:
    """RKE's FlannelBackend: the type as given, VNI and port through atoiWithDefault."""
    return {
        "Type": options.get(f"{prefix}backend_type", ""),
        "VNI": int(options.get(f"{prefix}backend_vni") or 1),
        "Port": int(options.get(f"{prefix}backend_port") or 8472),
    }


def network_options(config: ClusterConfig) -> dict[str, Any]:
    network, images, options = config.network, config.system_images, config.network.options
    common = {
        "ClusterCIDR": config.services.kube_controller.cluster_cidr,
        "RBACConfig": config.authorization.mode,
        "NodeSelector": network.node_selector or None,
        "UpdateStrategy": daemonset_strategy(network.update_strategy),
    }
    if network.plugin == "flannel":
        return {
            **common,
            "Image": images.flannel,
            "CNIImage": images.flannel_cni,
            "FlannelInterface": options.get("flannel_iface", ""),
            "FlannelBackend": _backend(options, "flannel_"),
            "ClusterVersion": ".".join(config.kubernetes_version.split(".")[:2]),
            "KubeFlannelPriorityClassName": options.get("kube_flannel_priority_class_name", ""),
        }
    if network.plugin == "canal":
        return {
            **common,
            "ClientCertPath": f"{KUBE_NODE}.pem",
            "APIRoot": "https://127.0.0.1:6443",
            "ClientKeyPath": f"{KUBE_NODE}-key.pem",
            "ClientCAPath": "/etc/kubernetes/ssl/kube-ca.pem",
            "KubeCfg": "/etc/kubernetes/ssl/kubecfg-kube-node.yaml",
            "NodeImage": images.canal_node,
            "CNIImage": images.canal_cni,
            "ControllersImage": images.canal_controllers,
            "CanalFlannelImg": images.canal_flannel,
            "CanalInterface": options.get("canal_iface", ""),
            "FlexVolImg": images.canal_flexvol,
            "FlannelBackend": _backend(options, "canal_flannel_"),
            "MTU": network.mtu,
            "Tolerations": tolerations(network.tolerations),
            "FlexVolPluginDir": options.get("canal_flex_volume_plugin_dir", ""),
            "CanalPriorityClassName": options.get("canal_priority_class_name", ""),
            "CalicoKubeControllersPriorityClassName": options.get(
                "calico_kube_controllers_priority_class_name", ""
            ),
        }
    return {
        **common,
        "KubeCfg": "/etc/kubernetes/ssl/kubecfg-kube-node.yaml",
        "CNIImage": images.calico_cni,
        "NodeImage": images.calico_node,
        "Calicoctl": images.calico_ctl,
        "ControllersImage": images.calico_controllers,
        "CloudProvider": options.get("calico_cloud_provider", ""),
        "FlexVolImg": images.calico_flexvol,
        "MTU": network.mtu,
        "Tolerations": tolerations(network.tolerations),
        "FlexVolPluginDir": options.get("calico_flex_volume_plugin_dir", ""),
        "CalicoNodePriorityClassName": options.get("calico_node_priority_class_name", ""),
        "CalicoKubeControllersPriorityClassName": options.get(
            "calico_kube_controllers_priority_class_name", ""
        ),
    }


def _crds_by_name(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """CRDs as far as rke-py keeps them: name, group, kind, plural, scope and version; their schemas are
    a departure the README lists."""
    out = []
    for item in objects:
        if item["kind"] == "CustomResourceDefinition":
            spec = item["spec"]
            names = {key: spec["names"][key] for key in ("kind", "plural")}
            versions = [v["name"] for v in spec["versions"]]
            kept = {"group": spec["group"], "names": names, "scope": spec["scope"], "versions": versions}
            item = {**item, "metadata": {"name": item["metadata"]["name"]}, "spec": kept}
            item.pop("status", None)
        out.append(item)
    return out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
def test_kdm_network_plugin_objects_equal_rkes(cluster: str, version: str) -> None:
    config = load_text(f"{NODES}kubernetes_version: {version}\n{CLUSTERS[cluster]}").config
    rke = kdm.render(config.network.plugin, version, network_options(config), pointers=("UpdateStrategy",))
    ours = next(a.objects for a in build(config) if a.name == "rke-network-plugin")
    assert kdm.differences(_crds_by_name(rke), _crds_by_name(ours)) == []
