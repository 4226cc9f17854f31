"""The seam between rke-py and a host: what observe, apply and verify may ask of one.

`Host` (SSH plus the Docker API over it) is the real implementation; tests use an in-memory one, so the
chokepoint, rollback and the etcd plane are tested without a lab.
"""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rke_py.plan.model import ContainerSpec, FileSpec, RunConfig

# A file rke-py writes goes to a name ending in this first, then is renamed over its path.
TEMPORARY = ".rke-py-tmp"


@dataclass(frozen=True)
class Completed:
    rc: int
    stdout: bytes
    stderr: bytes


def disk_full(directory: str, free_kib: int | None = None) -> str:
    """What a write that ran out of room says, the same whichever way (SFTP, Docker) it wrote."""
    free = f" ({free_kib} KiB free)" if free_kib is not None else ""
    return f"no space left on the disk holding {directory}{free}; free some, run again"


class DockerError(Exception):
    """A Docker API call on a host failed; `missing` when the container or image does not exist, `stopped`
    when Docker itself is not there (sshd found nothing listening on its socket)."""

    def __init__(self, message: str, *, missing: bool = False, stopped: bool = False):
        super().__init__(message)
        self.missing = missing
        self.stopped = stopped


@dataclass(frozen=True)
class DockerContainer:
    """One row of `docker ps -a`: what observe needs."""

    name: str
    id: str
    image: str
    running: bool  # running, or being restarted by Docker's restart policy
    labels: Mapping[str, str]


class Docker(Protocol):
    """The Docker operations rke-py performs on a host. Every method raises DockerError on failure."""

    def info(self) -> dict[str, Any]: ...

    def server_version(self) -> str:
        """The daemon's version (`docker version`'s Server.Version)."""
        ...

    def containers(self, label: str, names: Collection[str] = ()) -> list[DockerContainer]:
        """The containers with `label`, and those named in `names` without it (RKE starts a few so)."""
        ...

    def run_config(self, container: str) -> tuple[RunConfig, frozenset[str]]:
        """What `container` runs, and the environment its image sets itself (which its env includes)."""
        ...

    def image_tags(self) -> set[str]: ...

    def pull(self, image: str, auth: Mapping[str, str] | None) -> None: ...

    def create(self, spec: ContainerSpec) -> str: ...

    def start(self, container: str) -> None: ...

    def stop(self, container: str, timeout: int = 5) -> None: ...

    def rename(self, container: str, name: str) -> None: ...

    def remove(self, container: str) -> None: ...

    def logs(self, container: str, tail: int) -> list[str]: ...

    def never_stopped(self, container: str) -> bool:
        """Running, and never restarted by Docker: a component that is starting or serving, not crashing."""
        ...

    def exec(self, container: str, argv: list[str]) -> tuple[int, str]: ...


class HostConnection(Protocol):
    """One host for the length of a run: commands, files, HTTP(S) fetched from the node itself, Docker."""

    @property
    def address(self) -> str: ...

    @property
    def docker(self) -> Docker: ...

    @property
    def root(self) -> bool:
        """Whether the SSH user is root; if not, files and root's commands go through Docker."""
        ...

    def run(self, cmd: str, *, input: bytes | None = None, timeout: float = 60) -> Completed: ...

    def run_as_root(self, script: str) -> Completed: ...

    def write_files(self, files: Sequence[FileSpec]) -> None:
        """Replace each file atomically (a reader never sees part of one), with its mode."""
        ...

    def file_hashes(self, paths: list[str]) -> dict[str, str | None]: ...

    def https_get(
        self,
        url: str,
        *,
        ca_pem: bytes | None = None,
        cert_pem: bytes | None = None,
        key_pem: bytes | None = None,
        timeout: float = 5,
    ) -> tuple[int, bytes]: ...

    def http_get(self, url: str, *, timeout: float = 5) -> tuple[int, bytes]: ...

    def served_certificate(self, port: int) -> bytes:
        """The DER certificate the node serves on its loopback `port`, whoever signed it."""
        ...


def remove_if_present(docker: Docker, container: str) -> None:
    """Remove a container by name or id; one that is not there is not an error."""
    try:
        docker.remove(container)
    except DockerError as exc:
        if not exc.missing:
            raise


def last_logs(docker: Docker, container: str, lines: int) -> list[str]:
    """A failed container's last log lines for the error that names it, or none when Docker cannot give
    them (the error already says why)."""
    try:
        return docker.logs(container, lines)
    except DockerError:
        return []


def parse_sha256sum(out: str, paths: list[str]) -> dict[str, str]:
    """`sha256sum` output as path -> digest for the `paths` asked about; both ways of writing files use it.
    GNU escapes a name holding a newline or backslash (and marks its line with a leading backslash)."""
    found: dict[str, str] = {}
    wanted = set(paths)
    for line in out.splitlines():
        digest, sep, name = line.partition("  ")
        if not sep:
            continue
        if digest.startswith("\\"):
            digest, name = digest[1:], name.replace("\\n", "\n").replace("\\\\", "\\")
        if name in wanted:
            found[name] = digest
    return found


def tar_one(name: str, content: bytes, mode: int) -> bytes:
    """A tar stream of one file, as Docker's put_archive takes it."""
    return tar_files({name: (content, mode)})


def tar_files(files: Mapping[str, tuple[bytes, int]]) -> bytes:
    """A tar stream of files by name: (content, mode) each."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, (content, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(content), mode, int(time.time())
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()
