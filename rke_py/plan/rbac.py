"""The RBAC objects RKE creates (`ApplyAuthzResources`), without which real Kubernetes refuses the cluster.

RKE's kube-node certificate is shared by every kubelet (CN=system:node, O=system:nodes). The Node authorizer
only knows `system:node:<name>`, and Kubernetes' own ClusterRoleBinding `system:node` has no subjects, so
without the binding below no kubelet can register. The apiserver reaches kubelets (logs, exec, metrics)
as `kube-apiserver`, which a new cluster allows nothing on the kubelet API.
"""

from __future__ import annotations

from typing import Any

from rke_py.addons import k8s
from rke_py.config.schema import ClusterConfig
from rke_py.plan.common import is_rbac

KUBELET_API_ROLE = "proxy-clusterrole-kubeapiserver"  # RKE's names, so a cluster RKE built is already right
KUBELET_API_BINDING = "proxy-role-binding-kubernetes-master"
APISERVER_USER = "kube-apiserver"  # CN of the apiserver's kubelet client certificate


def rbac_objects(config: ClusterConfig) -> list[dict[str, Any]]:
    """What rke-py keeps in the API for authorization, in apply order; nothing with `authorization: none`."""
    if not is_rbac(config):
        return []
    kubelet_api = k8s.rule(
        [""],
        ["nodes/metrics", "nodes/log", "nodes/stats", "nodes/spec", "nodes/proxy"],
        ["get", "list", "watch", "create"],
    )
    return [
        k8s.cluster_role_binding("system:node", "system:node", [k8s.rbac_ref("Group", "system:nodes")]),
        k8s.cluster_role(KUBELET_API_ROLE, [kubelet_api]),
        k8s.cluster_role_binding(
            KUBELET_API_BINDING, KUBELET_API_ROLE, [k8s.rbac_ref("User", APISERVER_USER)]
        ),
    ]
