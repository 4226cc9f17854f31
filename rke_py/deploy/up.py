"""`up` and `plan`: one list of phases, run for real or as a dry run.

connect → preflight → prepare hosts (in the background) → etcd → control plane → kubeconfig → RBAC (on a
new cluster, as soon as an apiserver answers) → worker plane → hosts that left → state (file, then the
cluster) → node labels and taints → add-ons → verify.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from rke_py.addons import DNS_ADDONS, DNS_DEPLOYMENTS
from rke_py.config.schema import ClusterConfig, Node
from rke_py.deploy import actions as a
from rke_py.deploy import belonging, clusterstate, rolling
from rke_py.deploy.apply import PULLS_AT_ONCE, STARTING, Applier, Target
from rke_py.deploy.desired import Desired, prepare
from rke_py.deploy.handover import available
from rke_py.deploy.nodesync import node_actions
from rke_py.deploy.objects import object_actions
from rke_py.deploy.parallel import combined, for_all
from rke_py.deploy.phases import Phase, run_phases
from rke_py.deploy.preflight import preflight
from rke_py.deploy.pullauth import pull_auth
from rke_py.deploy.saving import save_state, write_kubeconfig
from rke_py.deploy.session import Connector, Options, Session
from rke_py.errors import ApplyError, HostError, PreflightError
from rke_py.kube.api import KubeAPIError
from rke_py.pki import expiry
from rke_py.plan import nginx_proxy
from rke_py.plan.components import PLANES
from rke_py.state import StateError, state_path_for, state_to_json
from rke_py.verify.checks import Report

log = logging.getLogger("rke_py.deploy")
HOST_PREPARATION = ("cleanup", "files", "images")  # what a host does before any plane, on its own
# Seconds between the proxies' reload (which returns once nginx's new workers serve) and stopping the
# apiservers they left: requests the old workers still have in flight finish.
PROXY_SETTLE = 1
SETTLE_POLL = 0.5  # seconds between verify's rounds while the cluster settles (probing only failing nodes)
SETTLE_WINDOW = 45  # seconds verify waits at least for the cluster to settle


@dataclass
class Run:
    """What the phases of one `up` share."""

    desired: Desired
    options: Options
    session: Session
    applier: Applier
    host_actions: dict[str, list[a.HostAction]] = field(default_factory=dict)
    cluster_actions: list[a.ClusterAction] = field(default_factory=list)
    batches: dict[str, list[rolling.Batch]] = field(default_factory=dict)  # per plane, in order
    report: Report | None = None
    early: dict[str, Future[None]] = field(default_factory=dict)  # a host's early start (EarlyStart)
    started_early: set[int] = field(default_factory=set)  # id() of the actions it carries out

    @property
    def config(self) -> ClusterConfig:
        return self.desired.config

    @property
    def reachable(self) -> list[Node]:
        """cluster.yml's nodes but the workers skipped because they could not be reached."""
        return [n for n in self.config.nodes if n.address in self.session.targets]

    @property
    def skipped(self) -> list[Node]:
        return [n for n in self.config.nodes if n.address not in self.session.targets]

    def in_phase(self, key: str, nodes: Sequence[Node] | None = None) -> list[a.HostAction]:
        addresses = [n.address for n in nodes] if nodes is not None else list(self.host_actions)
        return [x for address in addresses for x in self.host_actions.get(address, []) if x.phase == key]

    def per_host(self, targets: dict[str, Target], nodes: Sequence[Node], keys: Sequence[str]) -> None:
        """The actions of phases `keys` on every node, hosts in parallel; a host's own actions in order.
        Those the host started early (EarlyStart) are waited for instead: their start before the others,
        their health after them (kube-proxy never waited for the kubelet to be healthy)."""

        def apply_host(node: Node) -> None:
            target = targets.get(node.address)
            if target is None:
                return
            actions = [x for x in self.host_actions.get(node.address, []) if x.phase in keys]
            if node.address in self.early:
                self.early[node.address].result()
            self.applier.execute_all([x for x in actions if id(x) not in self.started_early], target)
            for action in actions:
                if id(action) in self.started_early and isinstance(action, STARTING):
                    self.applier.wait_for(target, action.spec)

        for_all(nodes, apply_host, self.options.concurrency)

    def per_node(self, actions: Sequence[a.ClusterAction]) -> None:
        """Changes to Nodes (label, cordon, drain, uncordon): one Node's in order, Nodes in parallel, so a
        thousand Nodes cost a thousand API round trips spread over `concurrency` workers, not in a row."""
        by_node: dict[str, list[a.ClusterAction]] = {}
        for action in actions:
            by_node.setdefault(action.target, []).append(action)

        def change(node_actions: list[a.ClusterAction]) -> None:
            for action in node_actions:
                self.applier.execute(action)

        for_all(by_node.values(), change, self.options.concurrency)


class Connect(Phase):
    key, title, reads = "connect", "connecting to every host", True

    def __init__(self, run: Run):
        self.r = run

    def run(self) -> None:
        r = self.r
        workers = rolling.worker_allowance(r.config)
        r.session.connect(workers=workers)
        for address in belonging.check(r.desired, [t.facts for t in r.session.targets.values()]):
            log.warning("%s: held another cluster's certificates or keys: they are replaced", address)
        for error in r.session.unreachable:
            log.warning(
                "%s: skipped (within max_unavailable_worker %d): %s", error.host, workers, error.detail
            )
        registered = r.session.registered_nodes() if r.session.apiserver_running() else None
        down = rolling.not_ready(r.config, r.reachable, registered)
        if down and len(r.session.unreachable) + len(down) > workers:
            raise PreflightError(
                [
                    HostError(
                        address,
                        "preflight: Node Ready",
                        f"its Node is NotReady; {len(r.session.unreachable) + len(down)} worker(s) are "
                        f"unavailable, more than upgrade_strategy.max_unavailable_worker allows ({workers})",
                    )
                    for address in down
                ]
            )
        for address in down:
            log.warning("%s: NotReady: changed first, counted against max_unavailable_worker", address)
        r.host_actions = r.session.host_actions()
        r.cluster_actions = r.session.cluster_actions(registered)
        proxies = {  # running proxies, and whether each is RKE's: they take apiservers out of rotation
            n.address: not seen.spec_hash
            for n in r.reachable
            if (seen := r.session.targets[n.address].facts.containers.get(nginx_proxy.NAME)) is not None
            and seen.running
            and r.desired.plan.node(n.address).container(nginx_proxy.NAME) is not None
        }
        for plane in PLANES[1:]:
            nodes = [n for n in r.reachable if r.desired.plan.node(n.address).in_plane(plane)]
            r.batches[plane] = rolling.schedule(
                r.config,
                plane,
                nodes,
                r.host_actions,
                registered,
                proxies,
                len(r.session.unreachable),
                together=plane == "worker" and r.desired.new_ca,
            )
            rolling.labelled(r.batches[plane], r.host_actions, plane)
            for batch in r.batches[plane]:
                r.cluster_actions += [*batch.before, *batch.after]
                for address, action in (*batch.proxies_out, *batch.proxies_back):
                    r.host_actions[address].append(action)
        if not any(self.r.host_actions.values()) and not self.r.cluster_actions:
            log.info("nothing to change: every host already matches cluster.yml")


class Preflight(Phase):
    key, title = "preflight", "preflight checks"

    def __init__(self, run: Run):
        self.r = run

    def has_work(self) -> bool:
        return True

    def run(self) -> None:
        nodes = {n.address: n for n in self.r.config.nodes}
        options = self.r.options
        failures = [
            f
            for t in self.r.session.targets.values()
            if (
                f := preflight(
                    self.r.config,
                    nodes[t.address],
                    t.facts,
                    self.r.desired.registry,
                    ignore_docker_version=options.ignore_docker_version,
                    check_ports=options.check_ports,
                )
            )
        ]
        if failures:
            raise PreflightError(failures)


class PrepareHosts(Phase):
    """Every host removes what it no longer runs, writes its files and pulls its images, in the background:
    each plane waits only for its own hosts' files and the images its containers there run, so etcd starts
    while the control plane's images still arrive. Every host pulls at once, PULLS_AT_ONCE images at a
    time: a worker waiting for the etcd and control plane hosts' pulls would leave its own network and
    cores idle for as long as theirs take (measured in the README's "Speed beside RKE")."""

    key, title = "prepare", "preparing hosts: removing what they no longer run, writing files, pulling images"

    def __init__(self, run: Run):
        self.r = run
        self.pool: ThreadPoolExecutor | None = None
        self.written: dict[str, Future[None]] = {}  # a host's cleanup and files
        self.pulled: dict[str, dict[str, Future[None]]] = {}  # a host's pulls, by image

    def planned(self) -> Sequence[a.Action]:
        return [x for key in HOST_PREPARATION for x in self.r.in_phase(key)]

    def run(self) -> None:
        nodes = self.r.reachable
        for node in nodes:
            self.written[node.address] = Future()
            self.pulled[node.address] = {p.image: Future() for p in self._pulls(node)}
        self.pool = ThreadPoolExecutor(max_workers=max(1, min(self.r.options.concurrency, len(nodes))))
        # the hosts the planes wait for first go first: a worker never holds a thread one of them needs
        for node in sorted(nodes, key=lambda n: not self.leads(n)):
            self.pool.submit(self._host, node)

    def leads(self, node: Node) -> bool:
        plan = self.r.desired.plan.node(node.address)
        return bool(plan.in_plane("etcd") or plan.in_plane("control"))

    def _pulls(self, node: Node) -> list[a.PullImage]:
        return [x for x in self.r.in_phase("images", [node]) if isinstance(x, a.PullImage)]

    def _host(self, node: Node) -> None:
        target = self.r.session.targets[node.address]
        pulled = self.pulled[node.address]
        try:
            todo = self.r.in_phase("files", [node])
            if todo:
                log.info("%s: writing %d files (certificates, kubeconfigs, configs)", node.address, len(todo))
            for key in ("cleanup", "files"):
                self.r.applier.execute_all(self.r.in_phase(key, [node]), target)
        except Exception as exc:  # the planes waiting for this host raise it
            for future in (self.written[node.address], *pulled.values()):
                future.set_exception(exc)
            return
        self.written[node.address].set_result(None)
        with ThreadPoolExecutor(max_workers=PULLS_AT_ONCE) as pulls:
            for action in self._pulls(node):
                done = pulls.submit(self.r.applier.execute, action, target)
                done.add_done_callback(functools.partial(_handed_on, pulled[action.image]))

    def ready(self, nodes: Sequence[Node], plane: str | None = None, *, every: bool = False) -> None:
        """Wait until `nodes` have their files, and the images `plane`'s containers on them run (with
        `every`, all their images, as the state's record that the hosts match needs); raise every failure
        among them at once."""
        errors = []
        for node in nodes:
            try:
                if every:
                    self._wait(node, self.pulled.get(node.address, {}))
                else:
                    self.ready_for(node, self.r.in_phase(plane, [node]) if plane else [])
            except HostError as exc:
                errors.append(exc)
        if errors:
            raise combined(errors, type(errors[0]))

    def ready_for(self, node: Node, actions: Sequence[a.HostAction]) -> None:
        """Wait until `node` has its files and the images `actions` start containers of."""
        self._wait(node, {x.spec.image for x in actions if isinstance(x, STARTING)})

    def _wait(self, node: Node, images: Collection[str]) -> None:
        pulled = self.pulled.get(node.address, {})
        for future in [self.written.get(node.address), *(pulled[i] for i in sorted(images) if i in pulled)]:
            if future is not None:
                future.result()

    def finished(self) -> bool:
        every = [*self.written.values(), *(f for pulls in self.pulled.values() for f in pulls.values())]
        return all(f.done() and f.exception() is None for f in every)

    def cleanup(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


def _handed_on(to: Future[None], done: Future[None]) -> None:
    """`done`'s outcome passed on to the future a plane waits for."""
    exc = done.exception()
    if exc is None:
        to.set_result(None)
    else:
        to.set_exception(exc)


class EarlyStart(Phase):
    """A host new to the worker plane (every host of a new cluster, an added node) starts its proxy and its
    kubelet as soon as its own files and images are there, beside etcd and the control plane, without
    waiting for their health: Rancher's kubelet entrypoint alone sleeps 10 s for cri-dockerd, and the
    kubelet and the proxy wait for an apiserver by themselves. The containers they take volumes from (a
    controlplane host's service-sidekick) are created with them. Nothing running is touched. Each plane
    waits for a host's early start before that host's other containers, and the worker plane waits for
    their health; containers that need an apiserver at start (kube-proxy) wait for the worker plane."""

    key, title = "early", "starting new nodes' proxies and kubelets as their images arrive"

    def __init__(self, run: Run, prepared: PrepareHosts):
        self.r = run
        self.prepared = prepared
        self.pool: ThreadPoolExecutor | None = None

    def has_work(self) -> bool:
        return any(self._early(n) for n in self.r.reachable)

    def _early(self, node: Node) -> list[a.CreateContainer]:
        """What `node` starts early: nothing unless its worker plane only creates containers; then those up
        to the first that needs an apiserver at start, after the ones this run creates that they take
        volumes from (none if such a one is replaced instead)."""
        actions = self.r.host_actions.get(node.address, [])
        worker = [x for x in actions if x.phase == "worker"]
        creates = [x for x in worker if isinstance(x, a.CreateContainer)]
        if len(creates) < len(worker):
            return []
        needs_api = {c.name for c in self.r.applier.registry if c.needs_api_at_start}
        early = list(itertools.takewhile(lambda x: x.spec.name not in needs_api, creates))
        sources = {name for x in early for name in x.spec.volumes_from}
        before = [
            x for x in actions if x.phase != "worker" and x.target in sources and isinstance(x, STARTING)
        ]
        made = [x for x in before if isinstance(x, a.CreateContainer)]
        return [*made, *early] if early and len(made) == len(before) else []

    def run(self) -> None:
        r = self.r
        # the hosts the control plane waits for first: a worker never holds a thread one of them needs
        nodes = sorted(r.reachable, key=lambda n: not self.prepared.leads(n))
        todo = [(n, early) for n in nodes if (early := self._early(n))]
        for node, early in todo:
            r.early[node.address] = Future()
            r.started_early.update(id(x) for x in early)
        self.pool = ThreadPoolExecutor(max_workers=max(1, min(r.options.concurrency, len(todo))))
        for node, early in todo:
            self.pool.submit(self._host, node, early)

    def _host(self, node: Node, early: Sequence[a.CreateContainer]) -> None:
        future = self.r.early[node.address]
        try:
            self.prepared.ready_for(node, early)
            target = self.r.session.targets[node.address]
            for action in early:
                self.r.applier.execute(action, target, wait=False)
        except Exception as exc:  # the planes waiting for this host raise it
            future.set_exception(exc)
            return
        future.set_result(None)

    def cleanup(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


class HostsPrepared(Phase):
    """What hosts did beside the planes over, and without a failure, before the state may say the hosts
    match: a host whose only change was its files, an image no container of this run needs, or the
    recurring snapshots' containers are waited for by no plane."""

    key, title = "prepared", "waiting for the hosts still writing files, pulling images or starting snapshots"

    def __init__(self, run: Run, prepared: PrepareHosts, etcd: EtcdPlane):
        self.r = run
        self.prepared = prepared
        self.etcd = etcd

    def has_work(self) -> bool:
        return not (self.prepared.finished() and self.etcd.finished())

    def run(self) -> None:
        self.prepared.ready(self.r.reachable, every=True)
        self.etcd.finish()


class EtcdPlane(Phase):
    """One member at a time. Members of hosts that left go first; a replaced member must be healthy
    before the next is touched; new members are started together (a new cluster has no quorum until
    most of them run) and checked at the end. With a new CA every member is replaced together, as RKE
    does: a member with the new CA and one with the old refuse each other, so one at a time never has
    quorum. Each member starts as soon as its host has etcd's image. The recurring snapshots' containers
    (rke-tools, often still arriving) start beside the planes after it, once their image is there: nothing
    waits for them but the state's record that the hosts match (`finish`)."""

    key, title = "etcd", "etcd plane, one member at a time"

    def __init__(self, run: Run, prepared: PrepareHosts):
        self.r = run
        self.prepared = prepared
        self.pool: ThreadPoolExecutor | None = None
        self.beside: Future[object] | None = None

    def planned(self) -> Sequence[a.Action]:
        return self.r.in_phase("etcd")

    def run(self) -> None:
        r = self.r
        nodes = r.config.hosts("etcd")
        self.prepared.ready(nodes)  # every member's certificates before membership changes
        targets = r.session.targets
        via = next((targets[n.address] for n in nodes if "etcd" in targets[n.address].facts.containers), None)
        for node in [
            *r.desired.removed,
            *r.desired.joining,
        ]:  # membership changes go through a running member
            for action in r.host_actions[node.address]:
                if isinstance(action, a.RemoveMember | a.AddMember) and via is not None:
                    r.applier.execute(action, via)
        changes = [
            (node, action)
            for node in nodes
            for action in r.host_actions[node.address]
            if action.phase == "etcd" and not isinstance(action, a.AddMember | a.RemoveMember)
        ]
        members = [change for change in changes if change[1].target == "etcd"]
        together = r.desired.new_ca or all(isinstance(x, a.CreateContainer) for _, x in members)

        def change(node_action: tuple[Node, a.HostAction]) -> None:
            node, action = node_action
            self.prepared.ready_for(node, [action])
            wait = not isinstance(action, a.CreateContainer) and not r.desired.new_ca
            r.applier.execute(action, targets[node.address], wait=wait)

        for_all(members, change, r.options.concurrency if together else 1)
        others = [c for c in changes if c[1].target != "etcd"]
        if others:
            self.pool = ThreadPoolExecutor(max_workers=1)
            self.beside = self.pool.submit(for_all, others, change, r.options.concurrency)
        for node in nodes:
            spec = r.desired.plan.node(node.address).container("etcd")
            if spec is not None:
                r.applier.wait_for(targets[node.address], spec)

    def finished(self) -> bool:
        return self.beside is None or (self.beside.done() and self.beside.exception() is None)

    def finish(self) -> None:
        if self.beside is not None:
            self.beside.result()

    def cleanup(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)


class Plane(Phase):
    """The control or the worker plane: each host's containers in start order, hosts in parallel."""

    TITLES = {"control": "control plane", "worker": "worker plane"}

    def __init__(self, run: Run, prepared: PrepareHosts, key: str):
        self.r = run
        self.prepared = prepared
        self.key = key
        self.title = self.TITLES[key]

    def planned(self) -> Sequence[a.Action]:
        return [
            x
            for b in self.r.batches.get(self.key, [])
            for x in (
                *b.before,
                *(x for _, x in b.proxies_out),
                *self.r.in_phase(self.key, b.nodes),
                *(x for _, x in b.proxies_back),
                *b.after,
            )
        ]

    def nodes(self) -> list[Node]:
        return [n for n in self.r.reachable if self.r.desired.plan.node(n.address).in_plane(self.key)]

    def run(self) -> None:
        """Batch by batch (`rolling.schedule`): a batch's hosts in parallel, each batch healthy (and its
        Nodes Ready and uncordoned) before the next starts."""
        self.prepared.ready(self.nodes(), self.key)
        batches = self.r.batches.get(self.key, [])
        for index, batch in enumerate(batches, 1):
            if batch.rolling:
                log.info(
                    "%s batch %d of %d: %s",
                    self.title,
                    index,
                    len(batches),
                    ", ".join(n.address for n in batch.nodes),
                )
            self.r.per_node(batch.before)
            # a proxy host still writing its files must be done first, or it could write nginx.conf back
            rotating = {address for address, _ in batch.proxies_out}
            self.prepared.ready([n for n in self.r.reachable if n.address in rotating])
            self._proxies(batch.proxies_out)
            if batch.proxies_out:
                time.sleep(PROXY_SETTLE)
            self.r.per_host(self.r.session.targets, batch.nodes, [self.key])
            self._proxies(batch.proxies_back)
            self.r.per_node(batch.after)

    def _proxies(self, rotations: list[tuple[str, a.RotateProxy]]) -> None:
        targets = self.r.session.targets
        for_all(rotations, lambda x: self.r.applier.execute(x[1], targets[x[0]]), self.r.options.concurrency)


class Kubeconfig(Phase):
    """As soon as the control plane runs, so a run that fails later still leaves a way into the cluster."""

    key, title = "kubeconfig", "writing the admin kubeconfig"

    def __init__(self, run: Run):
        self.r = run

    def has_work(self) -> bool:
        return True

    def run(self) -> None:
        write_kubeconfig(self.r.desired)
        self.r.session.control_plane_renewed()


class RemovedHosts(Phase):
    key, title = "removed", "cleaning hosts that left cluster.yml"

    def __init__(self, run: Run):
        self.r = run

    def planned(self) -> Sequence[a.Action]:
        return self.r.in_phase("removed")

    def run(self) -> None:
        self.r.per_host(self.r.session.removed_targets, self.r.desired.removed, [self.key])


class SaveState(Phase):
    """`current=False` before the first change (the certificates are never lost, even if applying fails);
    `True` once the hosts match, with the host keys learned on the way."""

    key = "state"
    TITLES = {False: "saving certificates to the state file", True: "saving the cluster state"}

    def __init__(self, run: Run, *, current: bool):
        self.r = run
        self.current = current
        self.title = self.TITLES[current]

    def has_work(self) -> bool:
        return True

    def run(self) -> None:
        if self.current:
            self.r.desired.state.host_keys.update(self.r.session.connector.learned_host_keys())
        save_state(self.r.desired, current=self.current)


class StoreState(Phase):
    """The state just saved, also in the cluster (RKE's `full-cluster-state` Secret): `util
    get-state-file` and the recurring snapshots read it back when the local file is lost."""

    key, title = "objects", "storing the cluster state in the cluster"

    def __init__(self, run: Run):
        self.r = run

    def has_work(self) -> bool:
        return True

    def run(self) -> None:
        text = state_to_json(self.r.desired.state, compact=True)
        if not clusterstate.fits(text):
            log.warning(
                "the cluster state (%.1f MiB) is larger than a Secret holds (1 MiB): not stored in the "
                "cluster (a copy there is an earlier run's, if any), so keep %s safe",
                len(text.encode()) / 2**20,
                state_path_for(self.r.desired.config_path),
            )
            return
        for action in object_actions([clusterstate.state_secret(text)], self.r.session.find):
            self.r.applier.execute(action)


class ApplyObjects(Phase):
    """The objects rke-py keeps in the API (RBAC first: without it no kubelet can register), re-read just
    before they are applied, as soon as the control plane answers. Where this run starts the apiservers
    (a new cluster), as soon as the first of them answers instead (`begin`, from ObjectsEarly), beside the
    rest of the control plane: the kubelets started early are refused registration until the
    `system:node` binding exists, and back off up to 7 s between tries; kube-proxy waits for its Node."""

    key, title = "objects", "cluster objects: RBAC"

    def __init__(self, run: Run):
        self.r = run
        self.pool: ThreadPoolExecutor | None = None
        self.early: Future[None] | None = None
        self.stopped = threading.Event()

    def planned(self) -> Sequence[a.Action]:
        return [x for x in self.r.cluster_actions if x.phase == self.key]

    def begin(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.early = self.pool.submit(self._once_answering)

    def _once_answering(self) -> None:
        self.r.applier.api_answers.wait()
        if not self.stopped.is_set():  # else woken by `stop`: the run failed before an apiserver answered
            self._apply()

    def run(self) -> None:
        if self.early is None:
            self._apply()
            return
        self.r.applier.api_answers.set()  # the control plane runs: whatever it started answers now
        self.early.result()

    def _apply(self) -> None:
        for action in self.r.session.object_actions():
            self.r.applier.execute(action)
        for seed in self.planned():
            if isinstance(seed, a.SeedObject):
                self.r.applier.execute(seed)

    def stop(self) -> None:
        if self.pool is not None:
            self.stopped.set()
            self.r.applier.api_answers.set()
            self.pool.shutdown(wait=True)


class ObjectsEarly(Phase):
    """Starts ApplyObjects in the background where no apiserver runs yet; its own place in the list waits
    for it. Not with a new CA: rke-py asks as the old admin until the Kubeconfig phase."""

    key, title = "objects-early", "cluster objects: RBAC, as soon as an apiserver answers"

    def __init__(self, run: Run, objects: ApplyObjects):
        self.r = run
        self.objects = objects

    def has_work(self) -> bool:
        r = self.r
        return not (r.desired.new_ca or r.session.apiserver_running()) and self.objects.has_work()

    def run(self) -> None:
        self.objects.begin()

    def cleanup(self) -> None:
        self.objects.stop()


class SyncNodes(Phase):
    """Node labels and taints, and the Nodes of hosts that left, re-read just before they are changed: new
    nodes register during the worker plane, so the diff made at connect time is only what `plan` shows."""

    key, title = "nodes", "cluster objects: node labels and taints"

    def __init__(self, run: Run, attempts: int = 15, pause: float = 2):
        self.r = run
        self.attempts = attempts
        self.pause = pause

    def planned(self) -> Sequence[a.Action]:
        return [x for x in self.r.cluster_actions if x.phase == self.key]

    def run(self) -> None:
        session = self.r.session
        for attempt in range(self.attempts):
            registered = session.registered_nodes() or {}
            pending = [n.name for n in self.r.reachable if n.name not in registered]
            if not pending or attempt + 1 == self.attempts:
                break
            time.sleep(self.pause)
        if pending:
            log.warning("nodes not registered yet, labels and taints not set: %s", ", ".join(pending))
        actions = node_actions(self.r.config, registered, self.r.desired.removed)
        self.r.per_node([x for x in actions if not (isinstance(x, a.SyncNode) and x.name in pending)])


class Addons(Phase):
    """Network plugin, DNS, metrics-server, ingress and user add-ons, in RKE's order, once the nodes are
    registered. Re-read just before they are applied. Each add-on has `addon_job_timeout` seconds: a
    refused object is retried until then (a custom resource waits for its CRD), then a system add-on stops
    `up` and a user add-on is a warning, as in RKE."""

    key, title = "addons", "add-ons: network plugin, DNS, metrics-server, ingress, user add-ons"

    def __init__(self, run: Run, pause: float = 2):
        self.r = run
        self.pause = pause

    def planned(self) -> Sequence[a.Action]:
        return [x for x in self.r.cluster_actions if x.phase == self.key]

    def run(self) -> None:
        todo = self.r.session.addon_actions()
        timeout = self.r.config.addon_job_timeout
        for addon in [*self.r.desired.addons, None]:  # None: what belongs to no add-on (RKE's Jobs)
            name = addon.name if addon else ""
            deadline = time.monotonic() + timeout
            mine = [x for x in todo if x.phase == self.key and getattr(x, "addon", "") == name]
            leaving = addon is not None and not addon.objects and name in DNS_ADDONS.values()
            if mine and leaving and not self._handed_over(name, deadline):
                continue
            try:
                for action in mine:
                    self._until(action, deadline)
            except ApplyError as exc:
                if addon is not None and not addon.critical:
                    log.warning("user add-on %s was not applied: %s", name, exc)
                    continue
                raise

    def _handed_over(self, old_addon: str, deadline: float) -> bool:
        """Whether what the DNS provider no longer in use left may go: at once when it answers nothing,
        else once the provider in use answers (both sit behind the kube-dns Service), so names keep
        resolving while the provider changes. Until the deadline; then the old one is kept, with a warning,
        and the next `up` tries again."""
        old = next(p for p, addon in DNS_ADDONS.items() if addon == old_addon)
        new, api = self.r.config.dns.provider, self.r.session.kube_api()
        if not available(api, DNS_DEPLOYMENTS[old]) or new not in DNS_DEPLOYMENTS:
            return True
        while not available(api, DNS_DEPLOYMENTS[new]):
            if time.monotonic() + self.pause > deadline:
                log.warning("%s is not answering yet: %s is kept until it does (run up again)", new, old)
                return False
            time.sleep(self.pause)
        return True

    def _until(self, action: a.ClusterAction, deadline: float) -> None:
        while True:
            try:
                self.r.applier.execute(action)
                return
            except ApplyError as exc:
                if time.monotonic() + self.pause > deadline:
                    raise
                log.info("retrying %s: %s", action.target, exc.detail)
                time.sleep(self.pause)


class AsPlanned(Phase):
    """Cluster actions carried out as planned when the run connected, in order: every Secret written back
    under a new encryption config (RKE's RewriteSecrets), add-on pods restarted after a new CA or a snapshot
    restore (RKE's RestartClusterPods)."""

    def __init__(self, run: Run, key: str, title: str):
        self.r = run
        self.key, self.title = key, title

    def planned(self) -> Sequence[a.Action]:
        return [x for x in self.r.cluster_actions if x.phase == self.key]

    def run(self) -> None:
        for action in self.planned():
            self.r.applier.execute(action)


class Verify(Phase):
    key, title = "verify", "verifying the cluster"

    def __init__(self, run: Run):
        self.r = run
        # a slow host's controller manager takes minutes to lead and fill the namespaces: as long as an API
        # call may be asked again (--api-timeout), at least SETTLE_WINDOW
        self.within = max(SETTLE_WINDOW, run.options.api_timeout)

    def has_work(self) -> bool:
        return self.r.options.verify

    def run(self) -> None:
        """Verify until it passes or `within` seconds pass: a lease whose holder was just replaced stays
        with the old holder until it expires (15 s by default), new nodes take a moment to be Ready, and
        a new cluster's namespaces get their ServiceAccount once the controller manager leads."""
        session = self.r.session
        skipped = skipped_targets(self.r.skipped)
        deadline = time.monotonic() + self.within
        report = session.verify()
        while report.failures(skipped) and time.monotonic() < deadline:
            log.info(
                "waiting for the cluster to settle: %s",
                "; ".join(f"{c.name} {c.target}" for c in report.failures(skipped)),
            )
            time.sleep(SETTLE_POLL)
            report = session.verify(again=report)
        self.r.report = report


def skipped_targets(nodes: Sequence[Node]) -> set[str]:
    """The targets verify reports skipped hosts under: their address and their Node's name."""
    return {x for n in nodes for x in (n.address, n.name)}


def up_phases(run: Run) -> list[Phase]:
    prepared = PrepareHosts(run)
    etcd = EtcdPlane(run, prepared)
    control, worker = (Plane(run, prepared, key) for key in PLANES[1:])
    objects = ApplyObjects(run)
    return [
        Connect(run),
        Preflight(run),
        SaveState(run, current=False),
        prepared,
        EarlyStart(run, prepared),
        etcd,
        ObjectsEarly(run, objects),
        control,
        Kubeconfig(run),
        objects,
        # before the current state says the cluster encrypts: a killed run rewrites again
        AsPlanned(run, "secrets", "rewriting every Secret under the encryption config"),
        worker,
        HostsPrepared(run, prepared, etcd),
        AsPlanned(run, "pods", "restarting the add-ons' pods (a new CA, a restored snapshot)"),
        RemovedHosts(run),
        SaveState(run, current=True),
        StoreState(run),
        SyncNodes(run),
        Addons(run),
        Verify(run),
    ]


@dataclass
class UpResult:
    host_actions: dict[str, list[a.HostAction]]
    cluster_actions: list[a.ClusterAction]
    report: Report | None
    skipped: list[Node] = field(default_factory=list)  # unreachable workers within max_unavailable_worker

    @property
    def changed(self) -> int:
        return sum(len(x) for x in self.host_actions.values()) + len(self.cluster_actions)


def _run(desired: Desired, options: Options, connector: Connector | None) -> tuple[Run, Session]:
    session = Session(desired, options, connector)
    applier = Applier(
        desired.bundle,
        pull_auth(desired.config),
        session.kube_api,
        desired.registry,
        options.concurrency,
        busy_patience=options.api_timeout,
    )
    return Run(desired, options, session, applier), session


def _no_restore_cut_off(desired: Desired) -> None:
    """A restore stopped before every etcd member had the snapshot's data is finished by the restore alone:
    `up` would start members of the old cluster beside members of the restored one."""
    if desired.state.restoring:
        name = desired.state.restored_snapshot
        raise StateError(
            f"{state_path_for(desired.config_path).name}: the restore of snapshot {name} was cut off before "
            f"every etcd member had its data: run `rke-py etcd snapshot-restore --name {name}` again (with "
            "the same --s3 options if it came from S3)"
        )


def up(
    desired: Desired,
    options: Options,
    on_phase: Callable[[Phase], None] = lambda p: None,
    connector: Connector | None = None,
) -> UpResult:
    """Bring every host and the cluster objects to the plan, phase by phase; save state and kubeconfig;
    verify. An encryption change made in two stages (a new key, or encryption turned off) runs twice, the
    second time from the state the first one saved."""
    _no_restore_cut_off(desired)
    now = dt.datetime.now(dt.UTC)
    expired, soon = expiry.ending(expiry.of_bundle(desired.bundle), now)
    for ending in (*expired, *soon):
        log.warning(expiry.warning(ending, now, desired.config.services.kubelet.generate_serving_certificate))
    if not desired.encryption_staged:
        return _apply(desired, options, on_phase, connector)
    first = _apply(desired, dataclasses.replace(options, verify=False), on_phase, connector)
    log.info("every Secret is written under the new encryption config: a second run takes the old one out")
    second = _apply(prepare(desired.config_path, registry=desired.registry), options, on_phase, connector)
    for address, actions in second.host_actions.items():
        first.host_actions.setdefault(address, []).extend(actions)
    return UpResult(
        first.host_actions, first.cluster_actions + second.cluster_actions, second.report, second.skipped
    )


def _apply(
    desired: Desired, options: Options, on_phase: Callable[[Phase], None], connector: Connector | None
) -> UpResult:
    run, session = _run(desired, options, connector)
    with session:
        try:
            run_phases(up_phases(run), on_phase=on_phase)
        except KubeAPIError as exc:  # a read the phases make while planning (changes are named by Applier)
            raise ApplyError("cluster", "reading the cluster's objects", str(exc)) from exc
    return UpResult(run.host_actions, run.cluster_actions, run.report, run.skipped)


def plan(desired: Desired, options: Options, connector: Connector | None = None) -> UpResult:
    """What `up` would do now, without changing anything: the same phases, as a dry run."""
    _no_restore_cut_off(desired)
    run, session = _run(desired, options, connector)
    with session:
        run_phases(up_phases(run), dry_run=True)
    return UpResult(run.host_actions, run.cluster_actions, None, run.skipped)
