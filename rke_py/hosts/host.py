"""A connected host: its SSH connection and the Docker API over it, as one `HostConnection`.

As root, files are written over SFTP and hashed and cleaned with shell commands; as a user who may only
use Docker, the same operations go through helper containers (`DockerFiles`). Nothing above this class
knows which.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rke_py.hosts.base import Completed
from rke_py.hosts.docker_api import HostDocker
from rke_py.hosts.dockerfiles import DockerFiles
from rke_py.hosts.ssh import Connection

if TYPE_CHECKING:
    from rke_py.plan.model import FileSpec


class Host:
    def __init__(self, conn: Connection, docker: HostDocker, files: DockerFiles | None = None):
        self.conn = conn
        self._docker = docker
        self.files = files  # None: the SSH user is root

    def __repr__(self) -> str:
        return f"<Host {self.conn!r}>"

    @property
    def address(self) -> str:
        return self.conn.host

    @property
    def docker(self) -> HostDocker:
        return self._docker

    @property
    def root(self) -> bool:
        return self.files is None

    def run(self, cmd: str, *, input: bytes | None = None, timeout: float = 60) -> Completed:
        return self.conn.run(cmd, input=input, timeout=timeout)

    def run_as_root(self, script: str) -> Completed:
        """`script` with root's rights on the host: over SSH as root, else in the host's namespaces."""
        return self.conn.run(script) if self.files is None else self.files.run_in_host(script)

    def write_files(self, files: Sequence[FileSpec]) -> None:
        """Replace each file atomically: over SFTP as root, else all of them through the helper container."""
        if self.files is None:
            self.conn.write_files([(f.path, f.content, f.mode) for f in files])
        else:
            self.files.write_files(files)

    def file_hashes(self, paths: list[str]) -> dict[str, str | None]:
        return self.conn.file_hashes(paths) if self.files is None else self.files.file_hashes(paths)

    def https_get(
        self,
        url: str,
        *,
        ca_pem: bytes | None = None,
        cert_pem: bytes | None = None,
        key_pem: bytes | None = None,
        timeout: float = 5,
    ) -> tuple[int, bytes]:
        return self.conn.https_get(url, ca_pem=ca_pem, cert_pem=cert_pem, key_pem=key_pem, timeout=timeout)

    def http_get(self, url: str, *, timeout: float = 5) -> tuple[int, bytes]:
        return self.conn.http_get(url, timeout=timeout)

    def served_certificate(self, port: int) -> bytes:
        return self.conn.served_certificate(port)

    def close(self) -> None:
        if self.files is not None:
            self.files.close()
        self._docker.close()
