"""The component registry: every container rke-py runs, in one table.

An entry says what the container is called, which plane starts it, which nodes run it, how its spec is
built, which host ports it needs and how its health is checked. The planner, observe, preflight, cleanup,
`remove`, the tables and progress all read this table, so adding a container is one entry plus its builder.

RKE's own containers that rke-py meets on hosts it takes over are listed here too, each with what rke-py
does about it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rke_py.config.schema import ClusterConfig, Node
from rke_py.plan import (
    etcd,
    etcd_snapshots,
    kube_apiserver,
    kube_controller_manager,
    kube_proxy,
    kube_scheduler,
    kubelet,
    nginx_proxy,
    sidekick,
)
from rke_py.plan.common import SIDEKICK
from rke_py.plan.model import ContainerSpec, HealthCheck

Plane = Literal["etcd", "control", "worker"]
PLANES: tuple[Plane, ...] = ("etcd", "control", "worker")  # start order
BACKUP_PREFIX = "old-"  # a rolling replace parks the previous container under this prefix


@dataclass(frozen=True)
class Placement:
    """What a builder gets: the cluster, the node, whether its etcd member joined a running cluster, and
    the apiservers' internal addresses (worked out once a plan)."""

    config: ClusterConfig
    node: Node
    joined: bool
    apiservers: tuple[str, ...]


@dataclass(frozen=True)
class Component:
    name: str
    plane: Callable[[Node], Plane]
    runs_on: Callable[[ClusterConfig, Node], bool]
    build: Callable[[Placement], ContainerSpec]
    ports: tuple[int, ...] = ()  # host ports it listens on: free, or held by one of ours, before it starts
    health: Callable[[Node], HealthCheck | None] = lambda node: None
    # Starts beside the container before it on the same host, not after that one is healthy: neither needs
    # the other (the controller manager and the scheduler both need only the apiserver before them).
    beside_previous: bool = False
    # Started only once an apiserver answers: where a new node's containers start before the control plane
    # (up's early start), it waits for the worker plane's turn.
    needs_api_at_start: bool = False


def _in(plane: Plane) -> Callable[[Node], Plane]:
    return lambda node: plane


def _check(url: str, client_cert: str = "") -> Callable[[Node], HealthCheck]:
    return lambda node: HealthCheck(url=url, client_cert=client_cert)


def _role(role: str) -> Callable[[ClusterConfig, Node], bool]:
    return lambda config, node: node.has(role)


REGISTRY: tuple[Component, ...] = (
    Component(
        etcd.NAME,
        _in("etcd"),
        lambda config, node: node.has("etcd") and not config.services.etcd.external_urls,
        lambda p: etcd.container(p.config, p.node, p.joined),
        ports=(2379, 2380),
        health=etcd.health,
    ),
    Component(
        etcd_snapshots.NAME,
        _in("etcd"),
        lambda config, node: node.has("etcd") and etcd_snapshots.enabled(config),
        lambda p: etcd_snapshots.container(p.config, p.node),
    ),
    # First on nodes without an apiserver: everything there reaches one through it. Its health is
    # checked through the proxy, so a proxy that reaches no apiserver is caught.
    Component(
        nginx_proxy.NAME,
        _in("worker"),
        lambda config, node: not node.has("controlplane"),
        lambda p: nginx_proxy.container(p.config, p.apiservers),
        ports=(6443,),
        health=_check("https://127.0.0.1:6443/healthz", "kube-node"),
    ),
    # Created, never started: the Kubernetes containers take /opt/rke-tools from it (volumes_from), so it
    # comes before them, in the control plane on controlplane nodes and in the worker plane elsewhere.
    Component(
        SIDEKICK,
        lambda node: "control" if node.has("controlplane") else "worker",
        lambda config, node: True,
        lambda p: sidekick.container(p.config),
    ),
    Component(
        kube_apiserver.NAME,
        _in("control"),
        _role("controlplane"),
        lambda p: kube_apiserver.container(p.config, p.node),
        ports=(6443,),
        # ready, not only alive: its authorizers have synced, so the next host may go (rolling changes)
        health=_check("https://localhost:6443/readyz", "kube-apiserver"),
    ),
    Component(
        kube_controller_manager.NAME,
        _in("control"),
        _role("controlplane"),
        lambda p: kube_controller_manager.container(p.config),
        ports=(10257,),
        health=_check("https://localhost:10257/healthz"),
    ),
    Component(
        kube_scheduler.NAME,
        _in("control"),
        _role("controlplane"),
        lambda p: kube_scheduler.container(p.config),
        ports=(10259,),
        health=_check("https://localhost:10259/healthz"),
        beside_previous=True,
    ),
    Component(
        kubelet.NAME,
        _in("worker"),
        lambda config, node: True,
        lambda p: kubelet.container(p.config, p.node),
        ports=(10250, 10248),
        health=_check("http://localhost:10248/healthz"),
    ),
    Component(
        kube_proxy.NAME,
        _in("worker"),
        lambda config, node: True,
        lambda p: kube_proxy.container(p.config, p.node),
        ports=(10256,),
        health=_check("http://localhost:10256/healthz"),
        beside_previous=True,
        # without --bind-address it looks its Node up once, backing off for a minute while it is missing
        needs_api_at_start=True,
    ),
)

# Containers RKE starts that rke-py finds on hosts it takes over (most carry RKE's name label).
# One-shot helpers are leftovers of an earlier (perhaps failed) RKE run: `up` removes them, since some hold
# ports or block a retry. (RKE's etcd-rolling-snapshots is a component: `up` keeps it when it runs what
# rke-py would run, and replaces it once otherwise.)
RKE_HELPERS = (
    "cluster-state-deployer",
    "cert-deployer",
    "file-deployer",
    "kube-cleaner",
    "rke-log-linker",
    "rke-log-cleaner",
    "rke-port-checker",
    "rke-etcd-port-listener",
    "rke-cp-port-listener",
    "rke-worker-port-listener",
    "rke-bundle-cert",
    "rke-selinux-checker",
    "etcd-snapshot-once",
    "etcd-restore",
    "etcd-checksum-checker",
    "etcd-download-backup",
    "etcd-Serve-backup",
    "etcd-extract-statefile",
    "etcd-remove-snapshot",
)


# What RKE starts without its name label, found by name
RKE_UNLABELLED = ("etcd-rolling-snapshots", "cluster-state-deployer")


def by_name(registry: tuple[Component, ...] = REGISTRY) -> dict[str, Component]:
    return {c.name: c for c in registry}


def port_owners(registry: tuple[Component, ...] = REGISTRY) -> dict[int, tuple[str, ...]]:
    """port → the components that may hold it, in registry order."""
    owners: dict[int, tuple[str, ...]] = {}
    for component in registry:
        for port in component.ports:
            owners[port] = (*owners.get(port, ()), component.name)
    return owners


def parked(name: str, registry: tuple[Component, ...] = REGISTRY) -> str:
    """The component a backup container (`old-<name>`) was parked for, or ""."""
    base = name[len(BACKUP_PREFIX) :] if name.startswith(BACKUP_PREFIX) else ""
    return base if base in by_name(registry) else ""


def leftover_reason(name: str, registry: tuple[Component, ...] = REGISTRY) -> str:
    """Why `up` removes a labelled container that is not a component."""
    if parked(name, registry):
        return "left by an interrupted replace"
    if name in RKE_HELPERS:
        return "RKE's one-shot helper, left over from an RKE run"
    return "no longer a component of rke-py"


def is_known(name: str, managed: bool, registry: tuple[Component, ...] = REGISTRY) -> bool:
    """Whether observe should report a labelled container that is not a component: rke-py's own, parked
    backups, and RKE's containers listed here. Other containers with RKE's label are not ours to touch."""
    return managed or bool(parked(name, registry)) or name in RKE_HELPERS
