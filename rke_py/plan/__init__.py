"""The plan: config + certificates → the containers and files each node must have. Pure; no I/O but
reading templates, so every rule here is tested with plain data.

Each component has its own module (`etcd`, `kube_apiserver`, ..., `nginx_proxy`) that builds its
ContainerSpec; the registry (`components`) says which node runs which; this module places them, adds the
files, and seals every spec with the digest of the files it reads, so a changed file replaces exactly the
containers that read it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from functools import partial

from rke_py.config.schema import ROLES, ClusterConfig, Node
from rke_py.pki.certs import CertKeyPair
from rke_py.plan import cloud_provider, kube_apiserver, kubelet, nginx_proxy
from rke_py.plan.cert_files import files_kind, node_files
from rke_py.plan.components import PLANES, REGISTRY, Component, Placement, Plane
from rke_py.plan.memo import once, planning
from rke_py.plan.model import (
    ClusterPlan,
    ContainerSpec,
    FileSpec,
    HealthCheck,
    NodePlan,
    Placed,
    files_digest,
)

__all__ = ["ClusterPlan", "ContainerSpec", "FileSpec", "NodePlan", "build_plan"]


def build_plan(
    config: ClusterConfig,
    bundle: Mapping[str, CertKeyPair],
    joined: Collection[str] = (),
    registry: tuple[Component, ...] = REGISTRY,
) -> ClusterPlan:
    """What every node of `config` must run, with the certificates of `bundle`. `joined`: addresses of
    etcd members added to the running cluster after it was created (their etcd starts as "existing").
    What is the same for many nodes (the proxy's and the apiserver's files, the apiserver list, the files
    and containers of alike nodes) is made once, not once a node (`memo`)."""
    with planning():
        everywhere = [*cloud_provider.files(config), *kube_apiserver.webhook_files(config)]
        shared = Shared(
            bundle=dict(bundle),
            files={
                True: [*kube_apiserver.files(config), *everywhere],
                False: [*nginx_proxy.files(config), *everywhere],
            },
            apiservers=tuple(nginx_proxy.apiservers(config)),
        )
        return ClusterPlan(
            nodes=[node_plan(config, shared, node, node.address in joined, registry) for node in config.nodes]
        )


@dataclass(frozen=True)
class Shared:
    """What every node's plan reads alike: the certificates, the config files by whether the node runs an
    apiserver, and the apiservers' internal addresses."""

    bundle: dict[str, CertKeyPair]
    files: Mapping[bool, list[FileSpec]]
    apiservers: tuple[str, ...]


def node_plan(
    config: ClusterConfig, shared: Shared, node: Node, joined: bool, registry: tuple[Component, ...]
) -> NodePlan:
    kind = files_kind(node)
    files, by_path = once(("files", kind), lambda: _files(config, shared, node))
    placement = Placement(config, node, joined, shared.apiservers)
    placed: list[Placed] = []
    for plane in PLANES:
        for component in registry:
            if component.plane(node) == plane and component.runs_on(config, node):
                spec = component.build(placement)
                sources = tuple(p.spec for p in placed if p.spec.name in spec.volumes_from)
                health = component.health(node)
                key = ("placed", plane, spec, health, kind, sources)
                placed.append(once(key, partial(_sealed, plane, spec, health, by_path, sources)))
    return NodePlan(
        address=node.address,
        hostname=node.name,
        roles=tuple(role for role in ROLES if node.has(role)),
        files=files,
        placed=placed,
        images=kubelet.pulled_images(config) if any(p.spec.name == kubelet.NAME for p in placed) else [],
    )


def _files(config: ClusterConfig, shared: Shared, node: Node) -> tuple[list[FileSpec], dict[str, FileSpec]]:
    """The node's files, and the same by path."""
    files = [*node_files(config, shared.bundle, node), *shared.files[node.has("controlplane")]]
    return files, {f.path: f for f in files}


def _sealed(
    plane: Plane,
    spec: ContainerSpec,
    health: HealthCheck | None,
    by_path: dict[str, FileSpec],
    sources: tuple[ContainerSpec, ...],
) -> Placed:
    """`spec` with its health check and the digest of the files and volumes it reads. Alike nodes share
    the result, so its hash is worked out once for all of them."""
    return Placed(
        plane, replace(spec, health=health, files_digest=files_digest(spec.files, by_path, sources))
    )
