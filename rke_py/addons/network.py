"""The network plugin cluster.yml's `network.plugin` names: canal (RKE's default), flannel or calico.

Names and selectors are the ones RKE's templates use (DaemonSet `canal`, `kube-flannel`, `calico-node`
selected by `k8s-app`), so a cluster RKE built is taken over in place.
"""

from __future__ import annotations

from rke_py.addons import calico, canal, flannel
from rke_py.addons.k8s import Obj
from rke_py.config.schema import ClusterConfig

PLUGINS = {"canal": canal.objects, "flannel": flannel.objects, "calico": calico.objects}


def objects(config: ClusterConfig) -> list[Obj]:
    build = PLUGINS.get(config.network.plugin)
    return build(config) if build else []
