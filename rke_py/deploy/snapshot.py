"""`etcd snapshot-save`, `snapshot-list`, `snapshot-restore` and `util get-state-file`.

A snapshot is taken once, from the first etcd member that answers, checked, packed with the cluster state
into RKE's archive and written to every etcd host (and S3): every host holds the same bytes, so a restore
never finds its members' snapshots differing. A restore checks the archive before anything is stopped,
puts the same snapshot on every etcd host, stops etcd and the Kubernetes components, restores every member
into one new cluster (the old data kept beside it), takes the state from the archive, and runs `up`.
"""

from __future__ import annotations

import base64
import logging
import posixpath
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from rke_py.config.schema import ClusterConfig, Node
from rke_py.deploy import rolling
from rke_py.deploy.actions import PullImage
from rke_py.deploy.apply import Applier
from rke_py.deploy.clusterstate import NAME, NAMESPACE, state_from_secret
from rke_py.deploy.clusterstate import PATH as STATE_SECRET_PATH
from rke_py.deploy.desired import Desired, prepare
from rke_py.deploy.parallel import combined, for_each
from rke_py.deploy.phases import Phase, run_phases
from rke_py.deploy.pullauth import pull_auth
from rke_py.deploy.session import Connector, Options, Session
from rke_py.deploy.up import UpResult, up
from rke_py.errors import AbortedError, ConnectError, HostError
from rke_py.files import set_aside
from rke_py.hosts.base import DockerError, remove_if_present
from rke_py.kube.api import KubeAPIError
from rke_py.pki.bundle import KUBE_ADMIN, KUBE_NODE
from rke_py.pki.certs import CertKeyPair
from rke_py.pki.paths import cert_path, key_path, ssl_dir
from rke_py.plan.common import CA
from rke_py.snapshots import onhost, s3
from rke_py.snapshots.archive import SUFFIX, Snapshot, SnapshotError, check_db, default_name, pack, unpack
from rke_py.state import (
    ClusterState,
    State,
    StateError,
    kubeconfig_path_for,
    state_from_json,
    state_path_for,
    state_to_json,
    write_state,
)
from rke_py.templating import hostport

log = logging.getLogger("rke_py.snapshots")
# What a restore stops: etcd, and everything that holds a watch on it, directly or through the apiserver.
STOPPED = (
    "etcd-rolling-snapshots",
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
)


@dataclass
class Saved:
    name: str
    size: int
    source: str  # the etcd host the snapshot was taken from
    hosts: list[str] = field(default_factory=list)  # etcd hosts that hold the archive
    s3: str = ""  # s3://bucket/key, when uploaded
    failed: list[HostError] = field(default_factory=list)  # etcd hosts that could not take it


@dataclass(frozen=True)
class Listed:
    name: str
    where: str  # an etcd host's address, or s3://bucket/folder
    size: int
    modified: datetime


class _ConnectRole(Phase):
    """The hosts of one role; those that do not answer are skipped, unless none does."""

    reads = True
    key = "connect"

    def __init__(self, session: Session, role: str):
        self.session = session
        self.role = role
        self.title = f"connecting to the {role} hosts"

    def run(self) -> None:
        self.session.connect(tolerate=True, nodes=self.session.desired.config.hosts(self.role))
        if not self.session.targets:
            raise combined(self.session.unreachable, ConnectError)
        for error in self.session.unreachable:
            log.warning("%s: skipped: %s", error.host, error.detail)


class _ConnectAll(Phase):
    """Every host: a restore restarts the Kubernetes components everywhere. Unreachable workers are
    skipped within max_unavailable_worker, as by `up`."""

    key, title, reads = "connect", "connecting to every host", True

    def __init__(self, session: Session):
        self.session = session

    def run(self) -> None:
        allowed = rolling.worker_allowance(self.session.desired.config)
        self.session.connect(workers=allowed)
        for error in self.session.unreachable:
            log.warning("%s: skipped: %s", error.host, error.detail)


def _etcd_targets(session: Session) -> list[Node]:
    return [n for n in session.desired.config.hosts("etcd") if n.address in session.targets]


def timeout(config: ClusterConfig) -> float:
    """Seconds a snapshot may take on a host: backup_config.timeout, else RKE's 300."""
    backup = config.services.etcd.backup_config
    return float(backup.timeout if backup and backup.timeout else 300)


def default_snapshot_name(config: ClusterConfig, now: datetime | None = None) -> str:
    """The name of a snapshot saved without --name; colon-free with backup_config.safe_timestamp."""
    backup = config.services.etcd.backup_config
    return default_name(now, safe=bool(backup and backup.safe_timestamp))


def _state_text(desired: Desired) -> str:
    if not desired.state.current.rke_config:
        raise SnapshotError(
            f"{state_path_for(desired.config_path)} holds no running cluster: run `rke-py up` first, or "
            "`rke-py util get-state-file` if the file was lost"
        )
    return state_to_json(desired.state)


def save(
    desired: Desired,
    options: Options,
    name: str,
    target: s3.S3Target | None,
    on_phase: Callable[[Phase], None] = lambda p: None,
    connector: Connector | None = None,
) -> Saved:
    state = _state_text(desired)
    saved: Saved = Saved(name, 0, "")
    with Session(desired, options, connector) as session:

        class Take(Phase):
            key, title = "snapshot", f"saving snapshot {name} from a healthy etcd member"

            def has_work(self) -> bool:
                return True

            def run(self) -> None:
                for node in _etcd_targets(session):
                    host = session.targets[node.address].host
                    try:
                        db = onhost.save_db(host, desired.config, node, timeout(desired.config))
                        check_db(db, f"snapshot {name} from {node.address}")
                    except (HostError, SnapshotError) as exc:
                        log.warning("%s: could not take the snapshot: %s", node.address, exc)
                        saved.failed.append(
                            exc
                            if isinstance(exc, HostError)
                            else HostError(node.address, "etcd snapshot: check", str(exc))
                        )
                        continue
                    self.archive = pack(Snapshot(name, db, state))
                    saved.source, saved.size = node.address, len(self.archive)
                    return
                raise combined(saved.failed, HostError) if saved.failed else SnapshotError("no etcd host")

        take = Take()

        class Keep(Phase):
            key, title = "keep", "writing the archive to every etcd host" + (" and S3" if target else "")

            def has_work(self) -> bool:
                return True

            def run(self) -> None:
                def write(node: Node) -> str:
                    with onhost.HostDir(session.targets[node.address].host, desired.config) as d:
                        d.write(f"{name}{SUFFIX}", take.archive)
                    return node.address

                done, errors = for_each(_etcd_targets(session), write, options.concurrency)
                saved.hosts = [address for _, address in done]
                if errors:
                    raise combined(errors, HostError)
                if target is not None:
                    s3.upload(target, name, take.archive)
                    saved.s3 = f"s3://{target.bucket}/{target.key(name)}"

        run_phases([_ConnectRole(session, "etcd"), take, Keep()], on_phase=on_phase)
    return saved


def listing(
    desired: Desired, options: Options, target: s3.S3Target | None, connector: Connector | None = None
) -> tuple[list[Listed], list[HostError]]:
    """Every archive on every reachable etcd host, and in S3; and the hosts that could not be asked."""
    rows: list[Listed] = []
    with Session(desired, options, connector) as session:
        run_phases([_ConnectRole(session, "etcd")])

        def archives(node: Node) -> list[onhost.Archive]:
            with onhost.HostDir(session.targets[node.address].host, desired.config) as d:
                return d.archives()

        found, errors = for_each(_etcd_targets(session), archives, options.concurrency)
        for node, archived in found:
            rows += [Listed(a.name, node.address, a.size, a.modified) for a in archived]
        errors = [*session.unreachable, *errors]
    if target is not None:
        rows += [Listed(x.name, target.where, x.size, x.modified) for x in s3.listing(target)]
    return sorted(rows, key=lambda r: (r.modified, r.where)), errors


@dataclass
class Restored:
    name: str
    source: str  # where the archive came from
    state_from: str  # "snapshot" or the local state file
    up: UpResult | None = None
    replaced: list[str] = field(default_factory=list)  # etcd hosts whose data was replaced


def restore(
    config_path: Path,
    options: Options,
    name: str,
    target: s3.S3Target | None,
    confirm: Callable[[str], bool],
    strict: bool = False,
    on_phase: Callable[[Phase], None] = lambda p: None,
    *,
    use_local_state: bool = False,
    custom_certs: Path | None = None,
) -> Restored:
    """Restore snapshot `name` into every etcd member, then `up`. Works without the local state file (the
    archive holds it) and onto brand-new etcd hosts (the archive from S3). RKE's flags: `use_local_state`
    takes the cluster state from the local file instead of the snapshot's, `custom_certs` the directory of
    the user's own certificates for the `up` that follows."""
    desired = prepare(config_path, strict=strict)
    fresh = not desired.state.restored_snapshot  # else one was cut off: its hosts set their old data aside
    result = Restored(name, "", "")
    with Session(desired, options) as session:
        run_phases([_ConnectAll(session)], on_phase=on_phase)
        snapshot = _fetch(session, name, target, result)
        state = _state_for(snapshot, desired, result, use_local_state)
        # The host keys this run trusted, not those pinned when the snapshot was taken: the hosts may be new.
        state.host_keys = {**desired.state.host_keys, **session.connector.learned_host_keys()}
        etcd_hosts = [n.address for n in desired.config.hosts("etcd")]
        question = (
            f"Restore snapshot {name} (from {result.source}) into the etcd members on "
            f"{', '.join(etcd_hosts)}? Their data is replaced (the old data is kept beside it as "
            f"etcd.before-restore), etcd, the control plane and every kubelet and kube-proxy restart, and "
            f"{state_path_for(config_path).name} is replaced by the state {result.state_from}"
        )
        if not confirm(question):
            raise AbortedError("nothing restored")
        write_state(state_path_for(config_path), state)
        desired = prepare(config_path, strict=strict)  # the certificates and keys of the snapshot
        session.desired = desired
        run_phases(_restore_phases(session, snapshot, result, fresh), on_phase=on_phase)
        state.restoring = False  # every member has the snapshot's data: `up` may start them
        write_state(state_path_for(config_path), state)
    result.up = up(prepare(config_path, strict=strict, custom_certs=custom_certs), options, on_phase)
    return result


def _fetch(session: Session, name: str, target: s3.S3Target | None, result: Restored) -> Snapshot:
    """The archive, from S3 or from the first etcd host that has it, checked."""
    if target is not None:
        result.source = f"s3://{target.bucket}/{target.key(name)}"
        return unpack(name, s3.download(target, name), result.source)
    for node in _etcd_targets(session):
        with onhost.HostDir(session.targets[node.address].host, session.desired.config) as d:
            if name not in {a.name for a in d.archives()}:
                continue
            result.source = f"{node.address}:{posixpath.join(onhost.snapshot_dir(d.config), name + SUFFIX)}"
            return unpack(name, d.read(f"{name}{SUFFIX}"), result.source)
    raise SnapshotError(
        f"snapshot {name} is on no etcd host ({', '.join(session.targets)}); "
        "`rke-py etcd snapshot-list` shows what exists, --s3 restores from S3"
    )


def _state_for(snapshot: Snapshot, desired: Desired, result: Restored, local: bool = False) -> ClusterState:
    """The snapshot's state, with the running cluster forgotten so `up` starts every member together; the
    local state when the snapshot has none (an archive from before the state was kept in it) or `local`
    asks for it (RKE's --use-local-state). The
    encryption config is kept as the snapshot has it: its Secrets are stored under those keys, which the
    cluster running now may no longer have. It names the snapshot until `up` has restarted the add-ons'
    pods, so a run killed before that still restarts them."""
    if snapshot.state is not None and not local:
        state = state_from_json(snapshot.state, f"the state in snapshot {snapshot.name}")
        result.state_from = "in the snapshot"
    elif desired.state.current.rke_config or (local and desired.state.desired.rke_config):
        state = desired.state
        why = "--use-local-state" if local else "the snapshot holds none"
        result.state_from = f"of {state_path_for(desired.config_path).name} ({why})"
    elif local:
        raise SnapshotError(
            f"--use-local-state: {state_path_for(desired.config_path)} holds no cluster to restore with"
        )
    else:
        raise SnapshotError(
            f"snapshot {snapshot.name} holds no cluster state and there is no local one to use with it"
        )
    state.desired = State(
        rke_config=state.current.rke_config or state.desired.rke_config,
        certificates=state.current.certificates or state.desired.certificates,
        encryption_config=state.desired.encryption_config or state.current.encryption_config,
    )
    state.current = State(encryption_config=state.current.encryption_config)
    state.etcd_members_added = []
    state.restored_snapshot = snapshot.name
    state.restoring = True
    return state


def _restore_phases(session: Session, snapshot: Snapshot, result: Restored, fresh: bool) -> Sequence[Phase]:
    desired = session.desired
    config = desired.config
    nodes = config.hosts("etcd")
    seconds = timeout(desired.config)
    applier = Applier(desired.bundle, pull_auth(config), session.kube_api, desired.registry)

    def each(fn: Callable[[Node], None], hosts: Sequence[Node]) -> None:
        _, errors = for_each(hosts, fn, session.options.concurrency)
        if errors:
            raise combined(errors, HostError)

    class Place(Phase):
        key, title = "place", f"putting snapshot {snapshot.name} on every etcd host"

        def has_work(self) -> bool:
            return True

        def run(self) -> None:
            def place(node: Node) -> None:
                target = session.targets[node.address]
                for image in (config.system_images.etcd, config.system_images.alpine):
                    if image not in target.facts.images:  # brand-new hosts have none yet
                        applier.execute(PullImage(image, "restore"), target)
                with onhost.HostDir(target.host, config) as d:
                    d.write(f"{snapshot.name}{SUFFIX}", pack(snapshot))

            each(place, nodes)

    class Stop(Phase):
        key, title = "stop", "stopping etcd and the Kubernetes components"

        def has_work(self) -> bool:
            return True

        def run(self) -> None:
            def stop(node: Node) -> None:
                target = session.targets[node.address]
                for name in STOPPED:
                    seen = target.facts.containers.get(name)
                    if seen is not None:
                        try:
                            remove_if_present(target.host.docker, seen.id)
                        except DockerError as exc:
                            raise HostError(node.address, f"restore: remove {name}", str(exc)) from exc

            each(stop, [n for n in config.nodes if n.address in session.targets])

    class Members(Phase):
        key, title = "restore", "restoring every etcd member from the snapshot"

        def has_work(self) -> bool:
            return True

        def run(self) -> None:
            def member(node: Node) -> None:
                host = session.targets[node.address].host
                onhost.restore_member(host, config, node, snapshot.db, seconds, fresh)

            each(member, nodes)
            result.replaced = [n.address for n in nodes]

    return [Place(), Stop(), Members()]


def get_state_file(desired: Desired, options: Options) -> tuple[Path, str]:
    """cluster.rkestate written back from the running cluster's `full-cluster-state` Secret (the file there
    is kept with a time suffix first), and whose certificate asked: the admin of the kubeconfig when it
    is still there and the cluster accepts it, else the kube-node identity of a controlplane host, as
    RKE's fallback. The local state is not read: it may be the damaged or stale one being replaced."""
    config = desired.config
    refusals = []
    with Session(desired, options) as session:
        run_phases([_ConnectRole(session, "controlplane")])
        servers = [
            hostport(n.address, 6443) for n in config.hosts("controlplane") if n.address in session.targets
        ]
        for ca, client, who in _identities(session):
            try:
                secret = session.connector.kube_api(servers, (ca, client)).get(STATE_SECRET_PATH)
                break
            except KubeAPIError as exc:
                refusals.append(f"{who}: {exc}")
        else:
            raise StateError(
                f"the cluster's state ({STATE_SECRET_PATH}) could not be read: " + "; ".join(refusals)
            )
    text = state_from_secret(secret)
    if text is None:
        raise StateError(f"{STATE_SECRET_PATH} has no {NAME} key")
    state = state_from_json(text, f"secret {NAMESPACE}/{NAME}")
    path = state_path_for(desired.config_path)
    set_aside(path)
    write_state(path, state)
    return path, who


def _identities(session: Session) -> Iterator[tuple[CertKeyPair, CertKeyPair, str]]:
    """(CA, client, whose) to ask the API with: the kubeconfig's admin when it can be read, then a
    controlplane host's kube-node."""
    kubeconfig = kubeconfig_path_for(session.desired.config_path)
    try:
        doc = YAML(typ="safe").load(kubeconfig.read_text())
        user = doc["users"][0]["user"]
        cluster = doc["clusters"][0]["cluster"]
        pem = {k: base64.b64decode(v).decode() for k, v in {**user, **cluster}.items() if k.endswith("-data")}
        yield (
            CertKeyPair(CA, pem["certificate-authority-data"]),
            CertKeyPair(KUBE_ADMIN, pem["client-certificate-data"], pem["client-key-data"]),
            f"the admin certificate of {kubeconfig.name}",
        )
    except (OSError, YAMLError, LookupError, TypeError, ValueError) as exc:
        log.debug("%s not used: %s", kubeconfig, exc)
    node = next(iter(session.targets.values()))
    with onhost.HostDir(node.host, session.desired.config, ssl_dir(session.desired.config.prefix_path)) as d:
        ca, cert, key = (
            d.read(posixpath.basename(p)).decode()
            for p in (cert_path(CA), cert_path(KUBE_NODE), key_path(KUBE_NODE))
        )
    yield (
        CertKeyPair(CA, ca),
        CertKeyPair(KUBE_NODE, cert, key),
        f"the kube-node certificate of {node.address}",
    )
