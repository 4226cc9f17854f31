"""Snapshot work on an etcd host, through the Docker API only (root or a docker-group user alike): short-lived
containers save a snapshot from the running member, keep archives in the snapshot directory, and restore a
member's data directory. Each takes RKE's container name and removes a leftover of the same name first,
so a run that was killed never blocks the next one (a known trap of RKE's restores).
"""

from __future__ import annotations

import contextlib
import io
import logging
import posixpath
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rke_py.config.schema import ClusterConfig, Node
from rke_py.errors import HostError
from rke_py.hosts.base import DockerError, HostConnection, disk_full, last_logs, remove_if_present, tar_one
from rke_py.hosts.docker_api import HostDocker
from rke_py.hosts.dockerfiles import HELPER_LABEL
from rke_py.plan import etcd
from rke_py.plan.common import KUBE_DIR, host_path
from rke_py.plan.etcd_snapshots import BACKUP, SNAPSHOT_DIR
from rke_py.snapshots.archive import SUFFIX

DATA_DIR = "/var/lib/etcd"  # the member's data on the host, under prefix_path
SAVED = "/etcd-snapshot.db"  # inside a one-shot container (saved there, or restored from): gone with it
LOG_LINES = 10
log = logging.getLogger("rke_py.snapshots")


def set_aside(fresh: bool) -> str:
    """The script that empties the member's data directory for a restore, the data it held kept beside it
    as `etcd.before-restore` (in /parent). A restore cut off and run again must not set aside what it
    restored the first time over the data from before it: `etcd.restoring` marks a restore under way,
    and only a `fresh` one (no restore unfinished) starts the marking anew. Fixed text: the directories
    are mounted, no value of cluster.yml is in it."""
    return (
        "set -e; cd /parent; "
        + ("rm -f etcd.restoring; " if fresh else "")
        + "if [ ! -e etcd.restoring ]; then rm -rf etcd.before-restore; touch etcd.restoring; fi; "
        "if [ -e etcd ] && [ ! -e etcd.before-restore ]; then mv etcd etcd.before-restore; fi; "
        "rm -rf etcd; mkdir -m 0700 etcd"
    )


@dataclass(frozen=True)
class Archive:
    """One archive in a host's snapshot directory."""

    name: str
    size: int
    modified: datetime


def snapshot_dir(config: ClusterConfig) -> str:
    """Where a host keeps snapshots: RKE's directory, which prefix_path does not move."""
    return SNAPSHOT_DIR


def _docker(host: HostConnection) -> HostDocker:
    docker = host.docker
    assert isinstance(docker, HostDocker), "snapshots need a real host's Docker API"
    return docker


@contextlib.contextmanager
def _container(
    host: HostConnection,
    step: str,
    name: str,
    image: str,
    command: Sequence[str],
    binds: Sequence[str],
    env: Sequence[str] = (),
    network: str = "host",
) -> Iterator[str]:
    """A created (not started) container named `name`, removed when the block ends; a Docker failure is
    a HostError naming the host and `step`."""
    docker = _docker(host)
    try:
        remove_if_present(docker, name)
        cid = docker.create_named(
            name,
            lambda api: api.create_container(
                image=image,
                name=name,
                command=list(command),
                environment=list(env),
                labels={HELPER_LABEL: name},
                host_config=api.create_host_config(binds=list(binds), network_mode=network),
            ),
        )
    except DockerError as exc:
        raise HostError(host.address, step, str(exc)) from exc
    try:
        yield cid
    finally:
        with contextlib.suppress(DockerError):
            remove_if_present(docker, cid)


def _finish(host: HostConnection, step: str, cid: str, timeout: float) -> None:
    """Start the container and wait for it; a non-zero exit is a HostError with its last log lines."""
    docker = _docker(host)
    try:
        docker.start(cid)
        code = docker.wait(cid, timeout)
    except DockerError as exc:
        raise HostError(host.address, step, str(exc), last_logs(docker, cid, LOG_LINES)) from exc
    if code:
        raise HostError(host.address, step, f"exited with {code}", last_logs(docker, cid, LOG_LINES))


def _read(host: HostConnection, cid: str, path: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(_docker(host).read_archive(cid, path))) as tar:
        member = tar.next()
        extracted = tar.extractfile(member) if member else None
        if extracted is None:
            raise DockerError(f"read {path}: not a file")
        return extracted.read()


def save_db(host: HostConnection, config: ClusterConfig, node: Node, timeout: float) -> bytes:
    """`etcdctl snapshot save` against the member on `node`, with its own certificate (RKE's
    etcd-snapshot-once), read back from the container."""
    step = "etcd snapshot: save"
    kube = host_path(config, KUBE_DIR)
    with _container(
        host,
        step,
        "etcd-snapshot-once",
        config.system_images.etcd,
        ["/usr/local/bin/etcdctl", "snapshot", "save", SAVED],
        [f"{kube}:{KUBE_DIR}:z"],
        etcd.etcdctl_env(node),
    ) as cid:
        _finish(host, step, cid, timeout)
        try:
            return _read(host, cid, SAVED)
        except DockerError as exc:
            raise HostError(host.address, step, str(exc)) from exc


class HostDir:
    """One directory of a host (the snapshot directory unless told), through one helper container
    (rke-tools: busybox) for a block of work."""

    def __init__(self, host: HostConnection, config: ClusterConfig, directory: str | None = None):
        self.host = host
        self.config = config
        self.directory = directory or snapshot_dir(config)
        self._stack = contextlib.ExitStack()
        self._cid: str | None = None

    def __enter__(self) -> HostDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _helper(self) -> str:
        if self._cid is None:
            self._cid = self._stack.enter_context(
                _container(
                    self.host,
                    "etcd snapshot: files",
                    "rke-py-snapshot-files",
                    self.config.system_images.alpine,
                    ["sleep", "3600"],
                    [f"{self.directory}:{BACKUP}:z"],
                    network="none",
                )
            )
            _docker(self.host).start(self._cid)
        return self._cid

    def _exec(self, step: str, argv: list[str]) -> str:
        try:
            code, out = _docker(self.host).exec(self._helper(), argv)
        except DockerError as exc:
            raise HostError(self.host.address, step, str(exc)) from exc
        if code:
            raise HostError(self.host.address, step, f"{argv[0]} exited with {code}: {out.strip()[-300:]}")
        return out

    def write(self, filename: str, data: bytes) -> None:
        """`filename` in the snapshot directory, 0600, replaced atomically."""
        step = f"etcd snapshot: write {filename}"
        tmp = f".{filename}.tmp"
        try:
            _docker(self.host).put_archive(self._helper(), BACKUP, tar_one(tmp, data, 0o600))
        except DockerError as exc:
            full = "no space left on device" in str(exc)
            raise HostError(self.host.address, step, disk_full(self.directory) if full else str(exc)) from exc
        self._exec(step, ["mv", "-f", posixpath.join(BACKUP, tmp), posixpath.join(BACKUP, filename)])

    def read(self, filename: str) -> bytes:
        try:
            return _read(self.host, self._helper(), posixpath.join(BACKUP, filename))
        except DockerError as exc:
            raise HostError(self.host.address, f"read {self.directory}/{filename}", str(exc)) from exc

    def archives(self) -> list[Archive]:
        """Every `<name>.zip` in the directory, oldest first."""
        out = self._exec(
            "etcd snapshot: list",
            [
                "sh",
                "-c",
                # A file pruned between the glob and its stat is skipped: stat's complaint is no row.
                f'for f in {BACKUP}/*{SUFFIX}; do [ -f "$f" ] && stat -c "%s %Y %n" "$f" 2>/dev/null; '
                "done; true",
            ],
        )
        found = []
        for line in out.splitlines():
            size, mtime, path = line.split(" ", 2)
            name = posixpath.basename(path)[: -len(SUFFIX)]
            found.append(Archive(name, int(size), datetime.fromtimestamp(int(mtime), UTC)))
        return sorted(found, key=lambda a: a.modified)


def restore_member(
    host: HostConnection, config: ClusterConfig, node: Node, db: bytes, timeout: float, fresh: bool
) -> None:
    """Replace the member's data with the snapshot `db` as a member of a new cluster of every etcd node:
    the old data is kept beside it as `etcd.before-restore` (`set_aside`; `fresh`: no restore was left
    unfinished). The snapshot is copied into the restore container itself, so no copy of it is left on
    the host."""
    data = host_path(config, DATA_DIR)
    step = "etcd restore: set the old data aside"
    with _container(
        host,
        step,
        "etcd-restore-prepare",
        config.system_images.alpine,
        ["sh", "-c", set_aside(fresh)],
        [f"{posixpath.dirname(data)}:/parent:z"],
        network="none",
    ) as cid:
        _finish(host, step, cid, timeout)
    flags = etcd.flags(config, node)
    step = "etcd restore: etcdutl snapshot restore"
    with _container(
        host,
        step,
        "etcd-restore",
        config.system_images.etcd,
        [
            "/usr/local/bin/etcdutl",
            "snapshot",
            "restore",
            SAVED,
            f"--data-dir={etcd.DATA_DIR}",
            *(f"--{key}={flags[key]}" for key in RESTORE_FLAGS),
        ],
        [f"{data}:{etcd.DATA_DIR}:z"],
        network="none",
    ) as cid:
        try:
            _docker(host).put_archive(cid, "/", tar_one(SAVED.lstrip("/"), db, 0o600))
        except DockerError as exc:
            raise HostError(host.address, step, str(exc)) from exc
        _finish(host, step, cid, timeout)


# The member's identity in the new cluster: the same values its etcd container starts with.
RESTORE_FLAGS = ("name", "initial-cluster", "initial-cluster-token", "initial-advertise-peer-urls")
