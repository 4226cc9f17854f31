"""One run against a cluster: load (offline) → connect → observe → diff → apply → verify → save.

`prepare` does everything that needs no host. `Session` owns the one connection per host for the run.
`up`, `actions` (for `rke-py plan`) and `remove` are the library entry points the CLI calls.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rke_py import config as config_pkg
from rke_py.config.schema import ROLES, ClusterConfig, Node
from rke_py.deploy.actions import Action, diff_host
from rke_py.deploy.apply import Target, execute, wait_for
from rke_py.deploy.observe import observe
from rke_py.deploy.parallel import DEFAULT_CONCURRENCY, for_each
from rke_py.deploy.preflight import preflight
from rke_py.deploy.reconcile import (
    clean_host,
    delete_nodes,
    joining_etcd_nodes,
    leaving_actions,
    removed_nodes,
)
from rke_py.errors import ConnectError, HostError, PreflightError, RkePyError, VerifyError
from rke_py.files import write_private_file
from rke_py.hosts.connections import Connections
from rke_py.hosts.hostkeys import HostKeyPolicy, HostKeyStore
from rke_py.pki.bundle import Bundle, build_bundle
from rke_py.pki.kubeconfig import admin_kubeconfig
from rke_py.plan import build_plan
from rke_py.plan.model import ClusterPlan
from rke_py.state import (
    ClusterState,
    State,
    kubeconfig_path_for,
    nodes_from_rke_json,
    read_state,
    rke_config_json,
    state_path_for,
    write_state,
)
from rke_py.verify.checks import Check, Report, role_taints, verify
from rke_py.verify.kubeapi import KubeAPI, KubeAPIError

log = logging.getLogger("rke_py.deploy")
ROLE_LABEL = "node-role.kubernetes.io"


@dataclass
class Options:
    host_key_policy: str = "accept-new"
    known_hosts: str | None = None  # an OpenSSH known_hosts file trusted besides the keys pinned in the state
    concurrency: int = DEFAULT_CONCURRENCY
    verify: bool = True


@dataclass
class Desired:
    """What the cluster must look like, computed without touching any host."""

    config_path: Path
    config: ClusterConfig
    state: ClusterState
    bundle: Bundle
    plan: ClusterPlan
    warnings: list = field(default_factory=list)
    certificates_from_state: bool = False  # False: a new cluster, certificates made in this run
    removed: list[Node] = field(default_factory=list)  # hosts of the last applied config no longer listed
    joining: list[Node] = field(default_factory=list)  # etcd nodes new to a running cluster: member add
    joined: set[str] = field(default_factory=set)  # addresses of etcd members that joined a running cluster


def prepare(config_path: str | Path, *, strict: bool = False) -> Desired:
    """Load cluster.yml and the state, build or reuse certificates, and plan every node. Pure of hosts."""
    config_path = Path(config_path)
    loaded = config_pkg.load(config_path, strict=strict)
    state = read_state(state_path_for(config_path)) or ClusterState()
    previous = state.desired.certificates or state.current.certificates
    bundle = build_bundle(loaded.config, previous or None)
    applied = nodes_from_rke_json(state.current.rke_config)
    joining = joining_etcd_nodes(applied, loaded.config.hosts("etcd"))
    etcd_now = {n.address for n in loaded.config.hosts("etcd")}
    joined = (set(state.etcd_members_added) & etcd_now) | {n.address for n in joining}
    plan = build_plan(loaded.config, bundle, joined)
    gone = removed_nodes(applied, loaded.config.nodes)
    return Desired(
        config_path,
        loaded.config,
        state,
        bundle,
        plan,
        loaded.warnings,
        bool(previous),
        gone,
        joining,
        joined,
    )


class Session:
    """The run's connections: one SSH connection (and Docker client on it) per host, closed together."""

    def __init__(self, desired: Desired, options: Options):
        self.desired = desired
        self.options = options
        self.host_keys = HostKeyStore(desired.state.host_keys, options.known_hosts)
        self.connections = Connections(
            desired.config, host_keys=self.host_keys, policy=HostKeyPolicy(options.host_key_policy)
        )
        self.targets: dict[str, Target] = {}
        self.unreachable: list[HostError] = []
        self.removed_targets: dict[str, Target] = {}

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.connections.close()

    def connect(self, *, tolerate: bool = False) -> None:
        """Connect and observe every host in parallel. Any failure stops the run before a change, unless
        `tolerate` (status: an unreachable host is a finding, not a reason to stop looking)."""
        results, errors = for_each(self.desired.config.nodes, self._connect_one, self.options.concurrency)
        self.targets = {node.address: target for node, target in results}
        self.unreachable = errors
        if errors and not tolerate:
            raise _combined(errors, ConnectError)
        gone, lost = for_each(self.desired.removed, self._connect_one, self.options.concurrency)
        self.removed_targets = {node.address: target for node, target in gone}
        for error in lost:  # as RKE: a removed host that cannot be reached is left as it is
            log.warning("%s: left cluster.yml but cannot be cleaned: %s", error.host, error.detail)

    def _connect_one(self, node: Node) -> Target:
        conn = self.connections.get(node)
        try:
            client = self.connections.docker(node)
            plan = next((p for p in self.desired.plan.nodes if p.address == node.address), None)
            facts = observe(node.address, client, conn.run, plan, self.desired.config.prefix_path)
        except HostError:
            raise
        except Exception as exc:
            raise ConnectError(node.address, "docker", str(exc)) from exc
        return Target(node.address, conn, client, facts, self.desired.config.prefix_path)

    def actions(self) -> dict[str, list[Action]]:
        actions = {
            n.address: diff_host(self.desired.plan.node(n.address), self.targets[n.address].facts)
            for n in self.desired.config.nodes
        }
        for node in self.desired.removed:
            actions[node.address] = leaving_actions(node, self.removed_targets.get(node.address))
        for node in self.desired.joining:
            if "etcd" not in self.targets[node.address].facts.containers:
                join = Action("add-member", "etcd", node.address, "joins the running etcd cluster", node=node)
                actions[node.address].insert(0, join)
        return actions

    def kube_api(self) -> KubeAPI:
        """Through the controlplane nodes' addresses, as the admin kubeconfig; reachable ones first."""
        cps = sorted(self.desired.config.hosts("controlplane"), key=lambda n: n.address not in self.targets)
        cps = [f"{n.address}:6443" for n in cps]
        return KubeAPI(cps, self.desired.bundle["kube-ca"], self.desired.bundle["kube-admin"])

    def verify(self) -> Report:
        d = self.desired
        conns = {a: t.conn for a, t in self.targets.items()}
        hostnames = {a: t.facts.hostname for a, t in self.targets.items()}
        report = verify(d.config, d.plan, d.bundle, conns, hostnames, self.kube_api())
        report.checks[:0] = [Check("host", e.host, False, e.detail) for e in self.unreachable]
        return report


def _combined(errors: list[HostError], kind: type[HostError]) -> RkePyError:
    if len(errors) == 1:
        return errors[0]
    first = errors[0]
    combined = kind(first.host, first.step, first.detail, first.log_tail)
    combined.args = ("\n".join(str(e) for e in errors),)
    return combined


@dataclass
class UpResult:
    actions: dict[str, list[Action]]
    report: Report | None
    kubeconfig: Path
    state_file: Path

    @property
    def changed(self) -> int:
        return sum(len(a) for a in self.actions.values())


def up(desired: Desired, options: Options, on_phase: Callable[[str], None] = lambda p: None) -> UpResult:
    """Bring every host to the plan, phase by phase; then save state and kubeconfig and verify."""
    config = desired.config
    state_file = state_path_for(desired.config_path)
    _save_state(desired, state_file, current=False)  # certificates are never lost, even if apply fails
    with Session(desired, options) as session:
        on_phase("connect")
        session.connect()
        on_phase("preflight")
        failures = [f for t in session.targets.values() if (f := preflight(config, t.facts))]
        if failures:
            raise PreflightError(failures)
        actions = session.actions()
        if not any(actions.values()):
            log.info("nothing to change: every host already matches cluster.yml")
        auth = _registry_auth(config)

        def run(phase: str, targets: dict[str, Target], nodes: list[Node]) -> None:
            on_phase(phase)
            _run_phase(targets, actions, phase, nodes, desired.bundle, auth, options)

        # Every host is prepared (cleanup, files, images) in the background; each plane waits only for
        # the hosts it runs on, so workers pull their images while etcd and the control plane start.
        with ThreadPoolExecutor(max_workers=max(1, min(options.concurrency, len(config.nodes)))) as pool:
            on_phase("prepare")
            prepared = {
                n.address: pool.submit(
                    _prepare_host, session.targets[n.address], actions[n.address], desired, auth
                )
                for n in config.nodes
            }
            _ready(prepared, config.hosts("etcd"))
            on_phase("etcd")
            _etcd_plane(session, actions, desired, auth)
            _ready(prepared, config.hosts("controlplane"))
            run("control", session.targets, config.hosts("controlplane"))
            _ready(prepared, config.nodes)
            run("worker", session.targets, config.nodes)
        if desired.removed:
            run("removed", session.removed_targets, desired.removed)
            delete_nodes(session.kube_api(), desired.removed)
        desired.state.host_keys.update(session.host_keys.learned)
        _save_state(desired, state_file, current=True)
        kubeconfig = kubeconfig_path_for(desired.config_path)
        server = f"https://{config.hosts('controlplane')[0].address}:6443"
        write_private_file(kubeconfig, admin_kubeconfig(config, desired.bundle, server))
        report = None
        if options.verify:
            on_phase("verify")
            _sync_nodes(config, session.kube_api())
            report = _settled_report(session)
        return UpResult(actions, report, kubeconfig, state_file)


def _settled_report(session: Session, within: float = 45) -> Report:
    """Verify until it passes or `within` seconds pass: a lease whose holder was just replaced stays
    with the old holder until it expires (15 s by default), and new nodes take a moment to be Ready."""
    deadline = time.monotonic() + within
    report = session.verify()
    while not report.ok and time.monotonic() < deadline:
        log.info(
            "waiting for the cluster to settle: %s",
            "; ".join(f"{c.name} {c.target}" for c in report.failures()),
        )
        time.sleep(3)
        report = session.verify()
    return report


def _prepare_host(target: Target, actions: list[Action], desired: Desired, auth) -> None:
    """A host's actions that need no other host: remove what it no longer runs, write files, pull images."""
    files = [a for a in actions if a.plane == "files"]
    if files:
        log.info("%s: writing %d files (certificates, kubeconfigs, configs)", target.address, len(files))
    for plane in ("cleanup", "files", "images"):
        for action in actions:
            if action.plane == plane:
                execute(target, action, desired.bundle, auth)


def _ready(prepared: dict[str, Future], nodes: list[Node]) -> None:
    """Wait until `nodes` are prepared; raise every failure among them at once."""
    errors = []
    for node in nodes:
        try:
            prepared[node.address].result()
        except HostError as exc:
            errors.append(exc)
    if errors:
        raise _combined(errors, type(errors[0]))


def _run_phase(targets, actions, phase, nodes, bundle, auth, options) -> None:
    """The actions of `phase` on every node, hosts in parallel; a host's own actions in order."""

    def apply_host(node: Node) -> None:
        target = targets.get(node.address)
        todo = [a for a in actions[node.address] if a.plane == phase and target is not None]
        for action in todo:
            execute(target, action, bundle, auth)

    _, errors = for_each(nodes, apply_host, options.concurrency)
    if errors:
        raise _combined(errors, type(errors[0]))


def _etcd_plane(session: Session, actions, desired: Desired, auth) -> None:
    """One member at a time. Members of hosts that left go first; a replaced member must be healthy
    before the next is touched; new members are started together (a new cluster has no quorum until
    most of them run) and checked at the end."""
    nodes = desired.config.hosts("etcd")
    via = next(
        (session.targets[n.address] for n in nodes if "etcd" in session.targets[n.address].facts.containers),
        None,
    )
    for node in [*desired.removed, *desired.joining]:  # membership changes go through a running member
        for action in actions[node.address]:
            if action.kind in ("remove-member", "add-member") and via is not None:
                execute(via, action, desired.bundle, auth)
    for node in nodes:
        target = session.targets[node.address]
        for action in actions[node.address]:
            if action.plane == "etcd" and action.kind != "add-member":
                execute(target, action, desired.bundle, auth, wait=action.kind != "create")
    for node in nodes:
        spec = next(c for c in desired.plan.node(node.address).etcd if c.name == "etcd")
        wait_for(session.targets[node.address], spec, desired.bundle)


def _registry_auth(config: ClusterConfig) -> dict[str, dict]:
    """Credentials per registry host, as `pull` looks them up (an empty url is Docker Hub, as in RKE)."""
    return {
        (r.url.split("://")[-1].split("/")[0] or "docker.io"): {"username": r.user, "password": r.password}
        for r in config.private_registries
        if r.user
    }


def _save_state(desired: Desired, path: Path, *, current: bool) -> None:
    state = desired.state
    state.desired = State(rke_config=rke_config_json(desired.config), certificates=dict(desired.bundle))
    if current:
        state.current = State(rke_config=state.desired.rke_config, certificates=dict(desired.bundle))
        state.etcd_members_added = sorted(desired.joined)
    write_state(path, state)


def _sync_nodes(config: ClusterConfig, api: KubeAPI, attempts: int = 15) -> None:
    """Labels and taints on each Node, as RKE's SyncLabelsAndTaints: role labels for the node's roles
    (others removed), the configured labels and taints, and the role taints; taints others set stay."""
    pending = list(config.nodes)
    for _ in range(attempts):
        still = []
        for node in pending:
            try:
                current = api.get(f"/api/v1/nodes/{node.name}")
                api.merge_patch(f"/api/v1/nodes/{node.name}", node_patch(node, current))
            except KubeAPIError:
                still.append(node)
        if not still:
            return
        pending = still
        time.sleep(2)
    log.warning("nodes not registered yet, labels and taints not set: %s", ", ".join(n.name for n in pending))


def node_patch(node: Node, current: dict) -> dict:
    labels: dict[str, str | None] = {f"{ROLE_LABEL}/{r}": ("true" if node.has(r) else None) for r in ROLES}
    labels |= dict(node.labels)
    labels |= {"rke.cattle.io/external-ip": node.address, "rke.cattle.io/internal-ip": node.internal_address}
    ours = [{"key": k, "value": "true", "effect": e} for k, e in role_taints(node)]
    ours += [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints]
    managed = {t["key"] for t in ours}
    kept = [
        t
        for t in current.get("spec", {}).get("taints") or []
        if t.get("key") not in managed and not t.get("key", "").startswith(ROLE_LABEL + "/")
    ]
    return {"metadata": {"labels": labels}, "spec": {"taints": (kept + ours) or None}}


def actions(desired: Desired, options: Options) -> dict[str, list[Action]]:
    """What `up` would do now, per host, without changing anything."""
    with Session(desired, options) as session:
        session.connect()
        return session.actions()


def remove(desired: Desired, options: Options) -> dict[str, list[str]]:
    """Remove every container and file rke-py put on each host; the hosts are left as before."""
    removed: dict[str, list[str]] = {}
    with Session(desired, options) as session:
        session.connect()

        def clean(node: Node) -> list[str]:
            target = session.targets[node.address]
            return clean_host(target.docker, target.conn.run, desired.config.prefix_path)

        results, errors = for_each(desired.config.nodes, clean, options.concurrency)
        if errors:
            raise _combined(errors, type(errors[0]))
        removed = {n.address: r for n, r in results}
    for path in (state_path_for(desired.config_path), kubeconfig_path_for(desired.config_path)):
        path.unlink(missing_ok=True)
    return removed


def require_ok(report: Report | None) -> None:
    if report is not None and not report.ok:
        lines = [f"{c.name} {c.target}: {c.detail}" for c in report.failures()]
        raise VerifyError("verification failed:\n  " + "\n  ".join(lines))
