"""The plan: config + certificates → the containers and files each node must have. Pure; no I/O but
reading templates, so every rule here is tested with plain data.

Each component has its own module (`etcd`, `kube_apiserver`, ..., `nginx_proxy`) that builds its
ContainerSpec; the registry (`components`) says which node runs which; this module places them, adds the
files, and seals every spec with the digest of the files it reads, so a changed file replaces exactly the
containers that read it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

from rke_py.config.schema import ROLES, ClusterConfig, Node
from rke_py.pki.certs import CertKeyPair
from rke_py.plan import kube_apiserver, kubelet, nginx_proxy
from rke_py.plan.cert_files import node_files
from rke_py.plan.components import PLANES, REGISTRY, Component, Placement
from rke_py.plan.model import ClusterPlan, ContainerSpec, FileSpec, NodePlan, Placed, files_digest

__all__ = ["ClusterPlan", "ContainerSpec", "FileSpec", "NodePlan", "build_plan"]


def build_plan(
    config: ClusterConfig,
    bundle: Mapping[str, CertKeyPair],
    joined: Collection[str] = (),
    registry: tuple[Component, ...] = REGISTRY,
) -> ClusterPlan:
    """What every node of `config` must run, with the certificates of `bundle`. `joined`: addresses of
    etcd members added to the running cluster after it was created (their etcd starts as "existing")."""
    return ClusterPlan(
        nodes=[node_plan(config, bundle, node, node.address in joined, registry) for node in config.nodes]
    )


def node_plan(
    config: ClusterConfig,
    bundle: Mapping[str, CertKeyPair],
    node: Node,
    joined: bool = False,
    registry: tuple[Component, ...] = REGISTRY,
) -> NodePlan:
    files = [*node_files(config, dict(bundle), node), *config_files(config, node)]
    by_path = {f.path: f for f in files}
    placement = Placement(config, node, joined)
    placed: list[Placed] = []
    for plane in PLANES:
        for component in registry:
            if component.plane(node) == plane and component.runs_on(config, node):
                spec = component.build(placement)
                sources = tuple(p.spec for p in placed if p.spec.name in spec.volumes_from)
                digest = files_digest(spec.files, by_path, sources)
                placed.append(
                    Placed(plane, replace(spec, health=component.health(node), files_digest=digest))
                )
    return NodePlan(
        address=node.address,
        hostname=node.name,
        roles=tuple(role for role in ROLES if node.has(role)),
        files=files,
        placed=placed,
        images=kubelet.pulled_images(config) if any(p.spec.name == kubelet.NAME for p in placed) else [],
    )


def config_files(config: ClusterConfig, node: Node) -> list[FileSpec]:
    """Files rke-py renders beside the certificates: nginx.conf, admission and audit policy."""
    if node.has("controlplane"):
        return kube_apiserver.files(config)
    return nginx_proxy.files(config)
