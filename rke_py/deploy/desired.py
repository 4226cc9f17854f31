"""What the cluster must look like, computed from cluster.yml and the state without touching any host."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rke_py import config as config_pkg
from rke_py.addons import Addon
from rke_py.addons import build as build_addons
from rke_py.config.schema import ClusterConfig, Node
from rke_py.config.upgrade import version_problems
from rke_py.deploy.reconcile import joining_etcd_nodes, removed_nodes
from rke_py.errors import ConfigError, Problem, UsageError
from rke_py.pki import custom
from rke_py.pki.bundle import CA, Bundle, build_bundle, rotate
from rke_py.plan import build_plan, encryption
from rke_py.plan.components import REGISTRY, Component
from rke_py.plan.model import ClusterPlan
from rke_py.plan.rbac import rbac_objects
from rke_py.state import (
    ClusterState,
    nodes_from_rke_json,
    read_state,
    recorded_images,
    rke_config_json,
    state_path_for,
)


@dataclass
class Desired:
    config_path: Path
    config: ClusterConfig
    state: ClusterState
    bundle: Bundle
    plan: ClusterPlan
    warnings: list[Problem] = field(default_factory=list)
    certificates_from_state: bool = False  # False: a new cluster, certificates made in this run
    applied: list[Node] = field(default_factory=list)  # the nodes of the config the cluster runs (state)
    removed: list[Node] = field(default_factory=list)  # hosts of the last applied config no longer listed
    joining: list[Node] = field(default_factory=list)  # etcd nodes new to a running cluster: member add
    joined: set[str] = field(default_factory=set)  # addresses of etcd members that joined a running cluster
    registry: tuple[Component, ...] = REGISTRY
    objects: list[dict[str, Any]] = field(default_factory=list)  # kept in the Kubernetes API, in order
    addons: list[Addon] = field(default_factory=list)  # applied once the nodes are there, in order
    rewrite_secrets: bool = False  # the apiservers get an encryption config the cluster did not run with
    encryption_staged: bool = False  # that config is the first of two stages: up runs again for the second

    @functools.cached_property
    def rke_config(self) -> dict[str, Any]:
        """cluster.yml as the state records it, converted once: `up` saves the state twice."""
        return rke_config_json(self.config)

    @property
    def new_ca(self) -> bool:
        """The cluster runs with another kube-ca than this run deploys (a CA rotation, maybe one a killed
        run began): etcd members restart together, and the API is asked with the running credentials
        until the control plane has the new ones."""
        running = self.state.current.certificates.get(CA)
        return running is not None and running.cert_pem != self.bundle[CA].cert_pem


@dataclass(frozen=True)
class Rotation:
    """`rke-py cert rotate` or cluster.yml's rotate_certificates: which certificates get new keys."""

    services: tuple[str, ...] = ()  # none: every certificate
    ca: bool = False

    @classmethod
    def from_config(cls, config: ClusterConfig) -> Rotation | None:
        given = config.rotate_certificates
        if given is None:
            return None
        return cls(tuple(given.get("services") or ()), bool(given.get("cacertificates")))


def prepare(
    config_path: str | Path,
    *,
    strict: bool = False,
    registry: tuple[Component, ...] = REGISTRY,
    rotation: Rotation | None = None,
    rotate_key: bool = False,
    changing: bool = False,
    custom_certs: Path | None = None,
    local_state: bool = True,
) -> Desired:
    """Load cluster.yml and the state, build, reuse or rotate certificates, and plan every node. Pure of
    hosts. `rotation` re-issues certificates of a cluster, `rotate_key` replaces the encryption key; so do
    cluster.yml's rotate_certificates and rotate_encryption_key in a command `changing` the cluster (up,
    plan), not in one that only reads it. `custom_certs`: the directory of the user's own certificates,
    used as they are once every one is checked. Without `local_state` the state file beside cluster.yml is
    not read (`util get-state-file` replaces it, damaged or not)."""
    config_path = Path(config_path)
    state = (read_state(state_path_for(config_path)) if local_state else None) or ClusterState()
    loaded = config_pkg.load(config_path, strict=strict, recorded=recorded_images(state.current.rke_config))
    running = str(state.current.rke_config.get("kubernetesVersion") or "")
    encrypting = state.current.encryption_config
    rotate_key = rotate_key or (changing and loaded.config.rotate_encryption_key and bool(encrypting))
    problems = [
        *version_problems(loaded.config, running, str(config_path)),
        *(encryption.rotation_problems(loaded.config, encrypting, str(config_path)) if rotate_key else []),
    ]
    if problems:
        raise ConfigError(problems)
    loaded.config.encryption_provider = encryption.desired_file(
        loaded.config, state.desired.encryption_config or encrypting, encrypting, rotate=rotate_key
    )
    previous = state.desired.certificates or state.current.certificates
    if rotation is not None and not previous:
        raise UsageError(f"no cluster state beside {config_path}: there are no certificates to rotate yet")
    if rotation is None and changing and previous:
        rotation = Rotation.from_config(loaded.config)
    if custom_certs is not None:
        bundle = custom.read(custom_certs, loaded.config)
    elif rotation is None:
        bundle = build_bundle(loaded.config, previous or None)
    else:
        bundle = rotate(loaded.config, previous, rotation.services, ca=rotation.ca)
    applied = nodes_from_rke_json(state.current.rke_config)
    joining = joining_etcd_nodes(applied, loaded.config.hosts("etcd"))
    etcd_now = {n.address for n in loaded.config.hosts("etcd")}
    joined = (set(state.etcd_members_added) & etcd_now) | {n.address for n in joining}
    return Desired(
        config_path=config_path,
        config=loaded.config,
        state=state,
        bundle=bundle,
        plan=build_plan(loaded.config, bundle, joined, registry),
        warnings=loaded.warnings,
        certificates_from_state=bool(previous),
        applied=applied,
        removed=removed_nodes(applied, loaded.config.nodes),
        joining=joining,
        joined=joined,
        registry=registry,
        objects=rbac_objects(loaded.config),
        addons=build_addons(loaded.config, config_path.parent),
        rewrite_secrets=encryption.rewrites(loaded.config.encryption_provider or "", encrypting),
        encryption_staged=encryption.staged(loaded.config, loaded.config.encryption_provider or ""),
    )
