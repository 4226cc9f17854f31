"""What the controller manager gives each namespace of a new cluster, made by rke-py as the cluster is made.

v1.28's controller manager starts its controllers one after another in no fixed order, and the node IPAM
controller (RKE turns on `allocate-node-cidrs`) first waits a fixed 10 s: in most runs the ServiceAccount
and root-CA controllers start after it, and until they run a namespace refuses every pod. So when a new
cluster's apiservers first answer, rke-py makes the same objects: the `default` ServiceAccount, and the
`kube-root-ca.crt` ConfigMap with the data and the annotation the root-CA publisher writes, which then
finds them as it would make them and leaves them. Only created where missing, never kept or updated:
they stay the controller manager's.
"""

from __future__ import annotations

from typing import Any

from rke_py.deploy.actions import SeedObject
from rke_py.kube.api import FIELD_MANAGER, KubeAPI, KubeAPIError

NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")  # what a new cluster has
ROOT_CA = "kube-root-ca.crt"
# the root-CA publisher rewrites a ConfigMap without it (pkg/controller/certificates/rootcacertpublisher)
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such "
    "as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
    "distributions of Kubernetes clusters."
)
REASON = "a new cluster: made before the controller manager gets to it"


def seeds(root_ca: str) -> list[SeedObject]:
    """The objects of every namespace a new cluster has; `root_ca` is the file the controller manager
    is given as --root-ca-file."""
    made = []
    for namespace in NAMESPACES:
        account = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": namespace},
        }
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": ROOT_CA,
                "namespace": namespace,
                "annotations": {"kubernetes.io/description": DESCRIPTION},
            },
            "data": {"ca.crt": root_ca},
        }
        made += [SeedObject(obj=account, reason=REASON), SeedObject(obj=config_map, reason=REASON)]
    return made


def create(api: KubeAPI, obj: dict[str, Any]) -> None:
    """Create `obj` unless it is there (the controller came first) or its namespace is not yet (the
    controller will make it there)."""
    meta = obj["metadata"]
    try:
        path = api.path(obj["apiVersion"], obj["kind"], namespace=meta["namespace"])
        api.request("POST", f"{path}?fieldManager={FIELD_MANAGER}", obj)
    except KubeAPIError as exc:
        if exc.status not in (404, 409):
            raise
