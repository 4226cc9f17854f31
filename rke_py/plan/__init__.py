"""The plan: config + certificates → the containers and files each node must have. Pure; no I/O but
reading templates, so every rule here is tested with plain data.

Each component has its own module (`etcd`, `kube_apiserver`, ..., `nginx_proxy`) that builds its
ContainerSpec; this module decides which node gets which, adds the files, and seals every spec with the
digest of the files it reads, so a changed file replaces exactly the containers that read it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

from rke_py.config.schema import ROLES, ClusterConfig, Node

# `rke_py.pki.files` imports `rke_py.plan.model`; importing the module (not its names) keeps that cycle safe.
from rke_py.pki import certs
from rke_py.pki import files as pki_files
from rke_py.plan import (
    etcd,
    kube_apiserver,
    kube_controller_manager,
    kube_proxy,
    kube_scheduler,
    kubelet,
    nginx_proxy,
    sidekick,
)
from rke_py.plan.model import ClusterPlan, ContainerSpec, FileSpec, NodePlan, files_digest

__all__ = ["ClusterPlan", "ContainerSpec", "FileSpec", "NodePlan", "build_plan"]


def build_plan(
    config: ClusterConfig, bundle: Mapping[str, certs.CertKeyPair], joined: Collection[str] = ()
) -> ClusterPlan:
    """What every node of `config` must run, with the certificates of `bundle`. `joined`: addresses of
    etcd members added to the running cluster after it was created (their etcd starts as "existing")."""
    return ClusterPlan(
        nodes=[node_plan(config, bundle, node, node.address in joined) for node in config.nodes]
    )


def node_plan(
    config: ClusterConfig, bundle: Mapping[str, certs.CertKeyPair], node: Node, joined: bool = False
) -> NodePlan:
    node_files = [*pki_files.node_files(config, dict(bundle), node), *config_files(config, node)]
    by_path = {f.path: f for f in node_files}

    def seal(specs: list[ContainerSpec]) -> list[ContainerSpec]:
        return [replace(s, files_digest=files_digest(s.files, by_path)) for s in specs]

    return NodePlan(
        address=node.address,
        hostname=node.name,
        roles=tuple(role for role in ROLES if node.has(role)),
        files=node_files,
        etcd=seal(etcd_plane(config, node, joined)),
        control=seal(control_plane(config, node)),
        worker=seal(worker_plane(config, node)),
    )


def config_files(config: ClusterConfig, node: Node) -> list[FileSpec]:
    """Files rke-py renders beside the certificates: nginx.conf, admission and audit policy."""
    if node.has("controlplane"):
        return kube_apiserver.files(config)
    return nginx_proxy.files(config)


def etcd_plane(config: ClusterConfig, node: Node, joined: bool = False) -> list[ContainerSpec]:
    if not node.has("etcd") or config.services.etcd.external_urls:
        return []
    return [etcd.container(config, node, joined)]


def control_plane(config: ClusterConfig, node: Node) -> list[ContainerSpec]:
    """The sidekick comes first: the Kubernetes containers take /opt/rke-tools from it (volumes_from)."""
    if not node.has("controlplane"):
        return []
    return [
        sidekick.container(config),
        kube_apiserver.container(config, node),
        kube_controller_manager.container(config),
        kube_scheduler.container(config),
    ]


def worker_plane(config: ClusterConfig, node: Node) -> list[ContainerSpec]:
    """Every node; nodes without their own apiserver reach the others through nginx-proxy, started first."""
    # On controlplane nodes the control plane already created the sidekick.
    own = [] if node.has("controlplane") else [nginx_proxy.container(config), sidekick.container(config)]
    return [
        *own,
        kubelet.container(config, node),
        kube_proxy.container(config, node),
    ]
