"""rke-py's metrics-server objects against RKE's own rendering of KDM's template, for every Kubernetes
version rke-py carries. RKE's inputs (cluster/addons.go MetricsServerOptions) are built here as RKE builds
them, with RKE's defaults (setDeploymentAddonDefaults, one replica)."""

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
    "blank_strategy": "monitoring: {update_strategy: {rollingUpdate: {maxUnavailable: 2}}}\n",
    "everything": """
monitoring:
  provider: metrics-server
  options: {kubelet-insecure-tls: "true", metric-resolution: 30s}
  node_selector: {metrics: "yes"}
  update_strategy: {strategy: RollingUpdate, rollingUpdate: {maxUnavailable: 2}}
  replicas: 2
  tolerations: [{key: dedicated, operator: Equal, value: metrics, effect: NoSchedule}]
  metrics_server_priority_class_name: metrics-high
""",
}


def _strategy(config: ClusterConfig) -> dict[str, Any]:
    """setDeploymentAddonDefaults, as the appsv1.DeploymentStrategy RKE passes: a strategy that is given
    and not RollingUpdate (a blank one too) is taken as it is."""
    given = config.monitoring.update_strategy
    kind, rolling = given.get("strategy", ""), given.get("rollingUpdate")
    if given and kind != "RollingUpdate":
        return {**({"type": kind} if kind else {}), **({"rollingUpdate": rolling} if rolling else {})}
    if rolling is None:
        return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    return {"type": kind, "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%", **rolling}}


def metrics_options(config: ClusterConfig) -> dict[str, Any]:
    monitoring, image = config.monitoring, config.system_images.metrics_server
    tag = image.split(":")[-1]
    return {
        "RBACConfig": config.authorization.mode,
        "Options": monitoring.options or None,
        "NodeSelector": monitoring.node_selector or None,
        "MetricsServerImage": image,
        "Version": ".".join(tag.split(".")[:2]) if "." in tag else "",
        "UpdateStrategy": _strategy(config),
        "Replicas": monitoring.replicas if monitoring.replicas is not None else 1,
        "Tolerations": tolerations(monitoring.tolerations),
        "MetricsServerPriorityClassName": monitoring.metrics_server_priority_class_name,
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
def test_kdm_metrics_server_objects_equal_rkes(cluster: str, version: str) -> None:
    config = load_text(f"{NODES}kubernetes_version: {version}\n{CLUSTERS[cluster]}").config
    rke = kdm.render(
        "metricsServer", version, metrics_options(config), pointers=("UpdateStrategy", "Replicas")
    )
    ours = next(a.objects for a in build(config) if a.name == "rke-metrics-addon")
    assert kdm.differences(rke, ours) == []
