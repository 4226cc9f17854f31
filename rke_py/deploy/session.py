"""A run's view of the cluster: one connection per host, what each host has, what the API holds, and the
actions that follow from them.

Hosts are reached through a `Connector`: `SSHConnector` for real hosts (one SSH connection each, the Docker
API over it), or an in-memory one in tests, so everything from observe to verify runs against either.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from rke_py.addons import ADDON_LABEL, PRUNE_KINDS, RKE_JOBS, WORKLOAD_KINDS
from rke_py.addons.k8s import label_selector, object_ref
from rke_py.config.schema import Node
from rke_py.deploy.actions import (
    AddMember,
    ApplyObject,
    ClusterAction,
    HostAction,
    RestartPods,
    RewriteSecrets,
)
from rke_py.deploy.apply import Target
from rke_py.deploy.desired import Desired
from rke_py.deploy.diff import diff_host
from rke_py.deploy.handover import handed_over
from rke_py.deploy.nodesync import node_actions
from rke_py.deploy.objects import identity, object_actions, prune_actions
from rke_py.deploy.observe import observe
from rke_py.deploy.parallel import DEFAULT_CONCURRENCY, combined, for_all, for_each
from rke_py.deploy.pullauth import pull_auth
from rke_py.deploy.reconcile import leaving_actions, update_only
from rke_py.deploy.seeds import seeds
from rke_py.deploy.targets import bastion_target, ssh_target
from rke_py.errors import ConnectError, HostError, UnreachableError
from rke_py.hosts import channels
from rke_py.hosts.base import DockerError, HostConnection
from rke_py.hosts.connections import Connections
from rke_py.hosts.docker_api import HostDocker
from rke_py.hosts.dockerfiles import DockerFiles
from rke_py.hosts.hostkeys import HostKeyPolicy, HostKeyStore
from rke_py.kube.api import API_PATIENCE, KubeAPI, KubeAPIError
from rke_py.pki.bundle import CA, KUBE_ADMIN
from rke_py.pki.certs import CertKeyPair
from rke_py.plan.common import KUBE_DIR, host_path
from rke_py.plan.registries import registry_of
from rke_py.templating import hostport
from rke_py.verify.checks import Check, Report, verify

log = logging.getLogger("rke_py.deploy")
DOCKER_PROBE_S = 10  # how long a failed run asks the failing host's Docker whether it still answers


@dataclass
class Options:
    host_key_policy: str = "accept-new"
    known_hosts: str | None = None  # an OpenSSH known_hosts file trusted besides the keys pinned in the state
    concurrency: int = DEFAULT_CONCURRENCY
    verify: bool = True
    # RKE's flags of the same names
    ssh_agent_auth: bool = False  # the agent at SSH_AUTH_SOCK for every host, whatever cluster.yml says
    ignore_docker_version: bool = False  # as cluster.yml's key of that name
    check_ports: bool = True  # False: --disable-port-check
    update_only: bool = False  # --update-only: a running cluster's hosts are left as they are
    api_timeout: float = API_PATIENCE  # seconds a call to a busy Kubernetes API or Docker is asked again


class Connector(Protocol):
    """How a run reaches hosts and the Kubernetes API."""

    def host(self, node: Node) -> HostConnection: ...

    def kube_api(
        self, servers: list[str], identity: tuple[CertKeyPair, CertKeyPair] | None = None
    ) -> KubeAPI:
        """`identity`: the CA and client certificate to ask with, the cluster's admin when None."""
        ...

    def learned_host_keys(self) -> dict[str, str]: ...

    def close(self) -> None: ...


class SSHConnector:
    """Real hosts over SSH, with the host keys pinned in the state; the API at the controlplane addresses,
    as the admin kubeconfig names them, each reached through its own node's SSH connection."""

    def __init__(self, desired: Desired, options: Options):
        self.desired = desired
        self.api_timeout = options.api_timeout
        # --ssh-agent-auth replaces cluster.yml's ssh_agent_auth for this run, bastion included (as RKE)
        self.config = (
            dataclasses.replace(desired.config, ssh_agent_auth=True)
            if options.ssh_agent_auth
            else desired.config
        )
        self.host_keys = HostKeyStore(desired.state.host_keys, options.known_hosts)
        self.connections = Connections(
            host_keys=self.host_keys,
            bastion=bastion_target(self.config),
            policy=HostKeyPolicy(options.host_key_policy),
            docker_files=self._docker_files,
            docker_patience=options.api_timeout,
        )
        self.controlplanes = {n.address: n for n in desired.config.hosts("controlplane")}

    def _docker_files(self, docker: HostDocker) -> DockerFiles:
        """Files through rke-tools containers, for a user in the docker group (RKE's cert-deployer way)."""
        config = self.desired.config
        auth = pull_auth(config)

        def ensure(image: str) -> None:
            if image not in docker.image_tags():
                docker.pull(image, auth.get(registry_of(image)))

        return DockerFiles(docker, config.system_images.cert_downloader, host_path(config, KUBE_DIR), ensure)

    def host(self, node: Node) -> HostConnection:
        return self.connections.host(ssh_target(node, self.config), node.docker_socket)

    def kube_api(
        self, servers: list[str], identity: tuple[CertKeyPair, CertKeyPair] | None = None
    ) -> KubeAPI:
        ca, client = identity or (self.desired.bundle["kube-ca"], self.desired.bundle["kube-admin"])
        return KubeAPI(servers, ca, client, self._dial, patience=self.api_timeout)

    def _dial(self, host: str, port: int) -> channels.Channel:
        """A channel from the controlplane node at `host` to its own apiserver, on the node's loopback (its
        address may be a NAT's that the node cannot reach itself); TLS still checks the name `host`."""
        return self.connections.get(ssh_target(self.controlplanes[host], self.config)).open_tcp(
            "127.0.0.1", port
        )

    def learned_host_keys(self) -> dict[str, str]:
        return dict(self.host_keys.learned)

    def close(self) -> None:
        self.connections.close()


class Session:
    """The run's connections and observations, closed together."""

    def __init__(self, desired: Desired, options: Options, connector: Connector | None = None):
        self.desired = desired
        self.options = options
        self.connector = connector or SSHConnector(desired, options)
        self.targets: dict[str, Target] = {}
        self.unreachable: list[HostError] = []
        self.removed_targets: dict[str, Target] = {}
        self._api: KubeAPI | None = None
        self._api_lock = threading.Lock()
        # Who rke-py is to the API: while a new CA is on its way, the running apiservers know the old one.
        running = desired.state.current.certificates
        self._identity = (running[CA], running[KUBE_ADMIN]) if desired.new_ca else None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        try:
            stopped = self._docker_stopped(error)
        finally:
            self.connector.close()
        if stopped is not None:
            raise stopped from error

    def _docker_stopped(self, error: BaseException | None) -> HostError | None:
        """A step that failed on a host whose Docker has stopped, said with that cause first: a health check
        or a container start failing is what the user sees, Docker stopping is what to mend. Asked for
        DOCKER_PROBE_S at most, so a host that is gone does not hold the run's end (its error says so)."""
        target = self.targets.get(error.host) if isinstance(error, HostError) else None
        if target is None or not isinstance(error, HostError) or isinstance(error, ConnectError):
            return None
        if str(error) != str(HostError(error.host, error.step, error.detail, error.log_tail)):
            return None  # several hosts failed (parallel.combined): each says its own cause
        stopped: list[DockerError] = []

        def probe() -> None:
            try:
                target.host.docker.info()
            except DockerError as exc:
                stopped.extend([exc] if exc.stopped else [])
            except HostError:
                pass  # the host itself cannot be reached again (a restart): its step's error stands

        asking = threading.Thread(target=probe, daemon=True)
        asking.start()
        asking.join(DOCKER_PROBE_S)
        if not stopped:
            return None
        cause = str(stopped[0]).removeprefix("docker info: ")
        if cause in error.detail:
            return None  # said already
        detail = f"Docker stopped answering ({cause}): start it, then run again; what failed: {error.detail}"
        return HostError(error.host, error.step, detail, error.log_tail)

    def connect(
        self, *, tolerate: bool = False, workers: int = 0, nodes: Sequence[Node] | None = None
    ) -> None:
        """Connect and observe every host (or only `nodes`) in parallel. A failure stops the run before any
        change, unless `tolerate` (status: an unreachable host is a finding, not a reason to stop looking),
        or unless only worker-only hosts failed and no more than `workers` of them (RKE's
        max_unavailable_worker)."""
        wanted = self.desired.config.nodes if nodes is None else nodes
        with ThreadPoolExecutor(max_workers=self.options.concurrency) as beside:
            results, errors = for_each(
                wanted, lambda n: self._connect_one(n, beside), self.options.concurrency
            )
        self.targets = {node.address: target for node, target in results}
        self.unreachable = errors
        roles = {n.address: n for n in self.desired.config.nodes}
        only_workers = all(
            isinstance(e, UnreachableError)
            and not (roles[e.host].has("etcd") or roles[e.host].has("controlplane"))
            for e in errors
        )
        if errors and not tolerate and not (only_workers and len(errors) <= workers):
            error = combined(errors, ConnectError)
            if only_workers:
                error.args = (
                    f"{error}\n{len(errors)} worker host(s) cannot be reached, more than "
                    f"upgrade_strategy.max_unavailable_worker allows ({workers}); nothing was changed",
                )
            raise error
        if nodes is not None:
            return
        gone, lost = for_each(self.desired.removed, self._connect_one, self.options.concurrency)
        self.removed_targets = {node.address: target for node, target in gone}
        for error in lost:  # as RKE: a removed host that cannot be reached is left as it is
            log.warning("%s: left cluster.yml but cannot be cleaned: %s", error.host, error.detail)

    def _connect_one(self, node: Node, beside: Executor | None = None) -> Target:
        """Connect and observe; `beside` runs observe's shell command while its Docker calls are made."""
        host = self.connector.host(node)
        plan = self.desired.plan.by_address.get(node.address)
        prefix = self.desired.config.prefix_path
        try:
            facts = observe(host, plan, prefix, self.desired.registry, beside)
        except DockerError as exc:
            raise ConnectError(node.address, "docker", str(exc)) from exc
        return Target(host, facts, prefix)

    def host_actions(self) -> dict[str, list[HostAction]]:
        """Per host address, what `up` changes there: the diff, plus membership changes and cleanup."""
        d = self.desired
        actions = {
            n.address: diff_host(d.plan.node(n.address), self.targets[n.address].facts, d.registry)
            for n in d.config.nodes
            if n.address in self.targets
        }
        for node in d.removed:
            actions[node.address] = leaving_actions(node, node.address in self.removed_targets)
        for node in d.joining:
            if "etcd" not in self.targets[node.address].facts.containers:  # etcd hosts are all reachable
                actions[node.address].insert(0, AddMember(node=node))
        if self.options.update_only:
            return update_only(d.applied, d.config.nodes, d.joining, actions)
        return actions

    def apiserver_running(self) -> bool:
        """Whether any controlplane host runs an apiserver now, so the API is worth asking."""
        return any(
            (seen := t.facts.containers.get("kube-apiserver")) is not None and seen.running
            for t in self.targets.values()
        )

    def cluster_actions(self, nodes: dict[str, dict[str, Any]] | None) -> list[ClusterAction]:
        """Changes to the objects rke-py keeps in the API and to the Nodes, from what the API holds now;
        `nodes` are the registered Nodes, None while no apiserver answers (then every change is made)."""
        return [
            *self.object_actions(running=nodes is not None),
            *(seeds(self.desired.bundle[CA].cert_pem) if nodes is None else []),
            *node_actions(self.desired.config, nodes, self.desired.removed),
            *self.addon_actions(running=nodes is not None),
            *(
                [RewriteSecrets(reason="stored anew under the encryption config")]
                if self.desired.rewrite_secrets
                else []
            ),
            *self.restart_pods(),
        ]

    def restart_pods(self) -> list[RestartPods]:
        """RKE's RestartClusterPods, after a new CA (the add-ons' pods trust the old one) and after a
        snapshot restore (what they hold of the API predates the restored data: a kube-dns that ran across
        a restore after a conformance run never learnt a Service made afterwards)."""
        snapshot = self.desired.state.restored_snapshot
        if self.desired.new_ca:
            reason = "they trust the old CA"
        elif snapshot:
            reason = f"they watched the API before snapshot {snapshot} was restored"
        else:
            return []
        return [
            RestartPods(
                namespace=obj["metadata"].get("namespace", "default"),
                selector=label_selector(obj["spec"]["selector"]["matchLabels"]),
                ref=object_ref(obj),
                reason=reason,
            )
            for _, obj in self.workloads()
        ]

    def workloads(self) -> list[tuple[str, dict[str, Any]]]:
        """The add-ons' DaemonSets and Deployments, with the add-on each belongs to."""
        addons = self.desired.addons
        return [(a.name, obj) for a in addons for obj in a.objects if obj["kind"] in WORKLOAD_KINDS]

    def object_actions(self, running: bool = True) -> list[ApplyObject]:
        return object_actions(self.desired.objects, self.find if running else None)

    def find(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        api = self.kube_api()
        try:
            return api.find(api.object_path(obj))
        except KubeAPIError as exc:
            if exc.status == 404:  # a kind not served yet: its CRD comes with the add-on
                return None
            raise

    def addon_actions(self, running: bool = True) -> list[ClusterAction]:
        """Every add-on's objects to apply, then the objects it had and no longer has (found by the add-on
        label), then RKE's finished add-on Jobs. All of them to apply while no apiserver answers."""
        addons = self.desired.addons
        if not running:
            return [x for addon in addons for x in object_actions(addon.objects, None, "addons", addon.name)]
        api = self.kube_api()
        kinds = dict.fromkeys(
            [*PRUNE_KINDS, *(f"{o['apiVersion']}/{o['kind']}" for a in addons for o in a.objects)]
        )
        groups: dict[str, list[str]] = {}  # apiVersion -> kinds: one discovery each, groups side by side
        for kind in kinds:
            api_version, _, name = kind.rpartition("/")
            groups.setdefault(api_version, []).append(name)

        def listed(api_version: str) -> list[dict[str, Any]]:
            return [item for name in groups[api_version] for item in api.list(api_version, name, ADDON_LABEL)]

        found = for_all(groups, listed, self.options.concurrency)
        labelled = {identity(item): item for _, items in found for item in items}
        actions: list[ClusterAction] = []
        wanted = [o for addon in addons for o in addon.objects]  # an object may move to another add-on
        for addon in addons:

            def current(obj: dict[str, Any]) -> dict[str, Any] | None:
                return labelled.get(identity(obj)) or self.find(obj)

            actions += object_actions(addon.objects, current, "addons", addon.name)
            had = [o for o in labelled.values() if o["metadata"]["labels"].get(ADDON_LABEL) == addon.name]
            pruned = prune_actions(wanted, had, f"no longer part of {addon.name}", addon.name)
            actions += handed_over(pruned, self.desired.config.dns.provider, wanted)
        jobs = [
            job
            for job in api.list("batch/v1", "Job")
            if identity(job)[2:] in {("kube-system", name) for name in RKE_JOBS}
            and (job.get("status") or {}).get("succeeded")
        ]
        actions += prune_actions([], jobs, "RKE's finished add-on Job")
        return actions

    def registered_nodes(self) -> dict[str, dict[str, Any]] | None:
        """Nodes by name, or None when no apiserver answers."""
        try:
            items = self.kube_api().get("/api/v1/nodes").get("items", [])
        except KubeAPIError as exc:
            log.debug("the Kubernetes API did not answer: %s", exc)
            return None
        return {n["metadata"]["name"]: n for n in items}

    def kube_api(self) -> KubeAPI:
        """Through the controlplane nodes' addresses, as the admin kubeconfig; reachable ones first. One
        client a run, whichever worker asks first (Node changes ask from many)."""
        with self._api_lock:
            if self._api is None:
                cps = sorted(
                    self.desired.config.hosts("controlplane"), key=lambda n: n.address not in self.targets
                )
                servers = [hostport(n.address, 6443) for n in cps]
                self._api = self.connector.kube_api(servers, self._identity)
            return self._api

    def control_plane_renewed(self) -> None:
        """The apiservers now run this run's certificates: ask them as this run's admin from now on."""
        with self._api_lock:
            if self._identity is not None:
                if self._api is not None:
                    self._api.close()
                self._identity, self._api = None, None

    def verify(self, again: Report | None = None) -> Report:
        """Every check; with `again` (an earlier report of this run) nodes whose checks all passed there
        keep those rows instead of being probed anew."""
        d = self.desired
        hosts = {a: t.host for a, t in self.targets.items()}
        hostnames = {a: t.facts.hostname for a, t in self.targets.items()}
        workloads = self.workloads()
        report = verify(
            d.config,
            d.plan,
            d.bundle,
            hosts,
            hostnames,
            self.kube_api(),
            workloads,
            self.options.concurrency,
            again,
            {a: t.file_hashes() for a, t in self.targets.items()},
        )
        report.checks[:0] = [Check("host", e.host, False, e.detail) for e in self.unreachable]
        return report
