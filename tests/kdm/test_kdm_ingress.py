"""rke-py's NGINX ingress objects against RKE's own rendering of KDM's templates, for every Kubernetes
version rke-py carries. RKE's inputs (cluster/addons.go ingressOptions) are built here as RKE builds them,
with RKE's defaults (setDaemonsetAddonDefaults; the watch-ingress-without-class flag it adds)."""

from __future__ import annotations

from typing import Any

import pytest

from rke_py.addons import build
from rke_py.config import load_text
from rke_py.config.schema import ClusterConfig
from tests.kdm import kdm
from tests.kdm.test_kdm_dns import NODES, VERSIONS, tolerations

pytestmark = pytest.mark.kdm

CLUSTERS = {
    "defaults": "",
    "host_network": "ingress: {network_mode: hostNetwork, http_port: 8080, https_port: 8443}\n",
    "none_mode": "ingress: {network_mode: none, extra_args: {http-port: '8081', https-port: '8444'}}\n",
    "blank_strategy": "ingress: {update_strategy: {rollingUpdate: {maxUnavailable: 2}}}\n",
    "on_delete": "ingress: {update_strategy: {strategy: OnDelete}}\n",
    "no_rbac": "authorization: {mode: none}\n" + kdm.OWN_ADMISSION + "ingress: {default_backend: true}\n",
    "everything": """
ingress:
  provider: nginx
  network_mode: hostPort
  http_port: 8080
  https_port: 8443
  options: {proxy-body-size: 8m, use-forwarded-headers: "true"}
  node_selector: {ingress: "yes"}
  extra_args: {enable-ssl-passthrough: "", watch-ingress-without-class: "false", v: "2"}
  dns_policy: ClusterFirstWithHostNet
  extra_envs: [{name: TZ, value: UTC}]
  extra_volumes: [{name: logs, hostPath: {path: /var/log/ingress}}]
  extra_volume_mounts: [{name: logs, mountPath: /var/log/nginx}]
  update_strategy: {strategy: RollingUpdate, rollingUpdate: {maxUnavailable: 2}}
  tolerations: [{key: dedicated, operator: Equal, value: ingress, effect: NoSchedule}]
  default_backend: true
  default_http_backend_priority_class_name: backend-high
  nginx_ingress_controller_priority_class_name: ingress-high
  default_ingress_class: false
""",
}


def daemonset_strategy(given: dict[str, Any]) -> dict[str, Any]:
    """setDaemonsetAddonDefaults, as the appsv1.DaemonSetUpdateStrategy RKE passes."""
    kind, rolling = given.get("strategy", ""), given.get("rollingUpdate")
    if not given or (kind == "RollingUpdate" and (rolling or {}).get("maxUnavailable") is None):
        return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    return {**({"type": kind} if kind else {}), **({"rollingUpdate": rolling} if rolling else {})}


def ingress_options(config: ClusterConfig) -> dict[str, Any]:
    ingress, images = config.ingress, config.system_images
    tag_parts = images.ingress.split(":")[-1].split("-")
    version = tag_parts[0] if len(tag_parts) == 2 else tag_parts[1]
    extra = dict(ingress.extra_args)
    if version >= "1.1.0":
        extra.setdefault("watch-ingress-without-class", "true")
    return {
        "RBACConfig": config.authorization.mode,
        "Options": ingress.options or None,
        "NodeSelector": ingress.node_selector or None,
        "ExtraArgs": extra or None,
        "ExtraEnvs": ingress.extra_envs or None,
        "ExtraVolumes": ingress.extra_volumes or None,
        "ExtraVolumeMounts": ingress.extra_volume_mounts or None,
        "DNSPolicy": ingress.dns_policy,
        "AlpineImage": "",
        "IngressImage": images.ingress,
        "IngressBackend": images.ingress_backend,
        "IngressWebhook": images.ingress_webhook,
        "HTTPPort": ingress.http_port,
        "HTTPSPort": ingress.https_port,
        "NetworkMode": ingress.network_mode,
        "DefaultBackend": bool(ingress.default_backend),
        "UpdateStrategy": daemonset_strategy(ingress.update_strategy),
        "Tolerations": tolerations(ingress.tolerations),
        "NginxIngressControllerPriorityClassName": ingress.nginx_ingress_controller_priority_class_name,
        "DefaultHTTPBackendPriorityClassName": ingress.default_http_backend_priority_class_name,
        "DefaultIngressClass": bool(ingress.default_ingress_class),
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
def test_kdm_ingress_objects_equal_rkes(cluster: str, version: str) -> None:
    config = load_text(f"{NODES}kubernetes_version: {version}\n{CLUSTERS[cluster]}").config
    rke = kdm.render("nginxIngress", version, ingress_options(config), pointers=("UpdateStrategy",))
    ours = next(a.objects for a in build(config) if a.name == "rke-ingress-controller")
    assert kdm.differences(rke, ours) == []
