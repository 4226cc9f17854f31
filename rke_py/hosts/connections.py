"""The run's SSH connections: one per host, opened on first use, closed together at the end.

Everything that touches a host (observe, apply, verify) asks this object for the host, so a run logs in
to each host once however many steps it takes, and all hosts share one bastion transport.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rke_py.hosts.docker_api import DEFAULT_SOCKET, HostDocker, docker_client
from rke_py.hosts.dockerfiles import DockerFiles
from rke_py.hosts.host import Host
from rke_py.hosts.hostkeys import HostKeyPolicy, HostKeyStore
from rke_py.hosts.keys import KeyLoader
from rke_py.hosts.ssh import Connection, SSHTarget, connect
from rke_py.kube.api import API_PATIENCE


class Connections:
    """Thread-safe: parallel workers asking for different hosts connect in parallel; for one host, once."""

    def __init__(
        self,
        *,
        host_keys: HostKeyStore,
        bastion: SSHTarget | None = None,
        policy: HostKeyPolicy = HostKeyPolicy.ACCEPT_NEW,
        timeout: float = 10,
        keys: KeyLoader | None = None,
        docker_files: Callable[[HostDocker], DockerFiles] | None = None,
        docker_patience: float = API_PATIENCE,
    ):
        self.host_keys = host_keys
        self.docker_files = docker_files  # how a host whose user is not root writes files
        self.bastion_target = bastion
        self.policy = policy
        self.timeout = timeout
        self.keys = keys
        self.docker_patience = docker_patience  # how long a busy Docker's repeatable call is asked again
        self.opened = 0  # SSH transports opened (bastion included): one per host per run
        self._conns: dict[str, Connection] = {}
        self._hosts: dict[str, Host] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def _host_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())

    def _open(self, key: str, target: SSHTarget, bastion: Connection | None) -> Connection:
        with self._host_lock(key):
            if key not in self._conns:
                self._conns[key] = connect(
                    target,
                    host_keys=self.host_keys,
                    policy=self.policy,
                    bastion=bastion,
                    timeout=self.timeout,
                    keys=self.keys,
                )
                with self._lock:
                    self.opened += 1
            return self._conns[key]

    def bastion(self) -> Connection | None:
        target = self.bastion_target
        return None if target is None else self._open("bastion", target, None)

    def get(self, target: SSHTarget) -> Connection:
        """The target's connection (through the bastion when there is one)."""
        return self._open(f"node {target.address}:{target.port}", target, self.bastion())

    def host(self, target: SSHTarget, docker_socket: str = DEFAULT_SOCKET) -> Host:
        """The target's connection with its Docker API on `docker_socket` (RKE's `docker_socket`)."""
        conn = self.get(target)
        key = f"{target.address}:{target.port}"
        with self._host_lock(f"docker {key}"):
            if key not in self._hosts:
                docker = docker_client(conn, docker_socket or DEFAULT_SOCKET, patience=self.docker_patience)
                # root is uid 0: only another user's uid is worth a round trip to ask
                root = target.user == "root" or conn.run("id -u").stdout.strip() == b"0"
                files = None if root or self.docker_files is None else self.docker_files(docker)
                self._hosts[key] = Host(conn, docker, files)
            return self._hosts[key]

    def close(self) -> None:
        """Close every connection, tunnelled ones before the bastion they run through."""
        with self._lock:
            hosts, conns = list(self._hosts.values()), list(self._conns.items())
            self._hosts.clear()
            self._conns.clear()
        for host in hosts:
            host.close()
        for key, conn in conns:
            if key != "bastion":
                conn.close()
        for key, conn in conns:
            if key == "bastion":
                conn.close()

    def __enter__(self) -> Connections:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
