"""The run's SSH connections: one per host, opened on first use, closed together at the end.

Everything that touches a host (observe, apply, verify) asks this object for the host's connection, so
a run logs in to each host once however many steps it takes, and all hosts share one bastion transport.
"""

from __future__ import annotations

import threading

from rke_py.config.schema import ClusterConfig, Node
from rke_py.hosts.docker_api import DEFAULT_SOCKET, NodeDockerClient, docker_client
from rke_py.hosts.hostkeys import HostKeyPolicy, HostKeyStore
from rke_py.hosts.keys import KeyLoader
from rke_py.hosts.ssh import Connection, bastion_target, connect, target_for


class Connections:
    """Thread-safe: parallel workers asking for different hosts connect in parallel; for one host, once."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        host_keys: HostKeyStore,
        policy: HostKeyPolicy = HostKeyPolicy.ACCEPT_NEW,
        timeout: float = 10,
        keys: KeyLoader | None = None,
    ):
        self.config = config
        self.host_keys = host_keys
        self.policy = policy
        self.timeout = timeout
        self.keys = keys
        self.opened = 0  # SSH transports opened (bastion included): one per host per run
        self._conns: dict[str, Connection] = {}
        self._dockers: dict[str, NodeDockerClient] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def _host_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())

    def _open(self, key: str, target, bastion: Connection | None) -> Connection:
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
        target = bastion_target(self.config)
        return None if target is None else self._open("bastion", target, None)

    def get(self, node: Node) -> Connection:
        """The node's connection (through the bastion when cluster.yml has one)."""
        target = target_for(node, self.config)
        return self._open(f"node {target.address}:{target.port}", target, self.bastion())

    def docker(self, node: Node) -> NodeDockerClient:
        """The node's Docker client over its connection, on its `docker_socket`."""
        conn = self.get(node)
        with self._host_lock(f"docker {node.address}:{node.port}"):
            key = f"{node.address}:{node.port}"
            if key not in self._dockers:
                self._dockers[key] = docker_client(conn, node.docker_socket or DEFAULT_SOCKET)
            return self._dockers[key]

    def close(self) -> None:
        """Close every connection, tunnelled ones before the bastion they run through."""
        with self._lock:
            dockers, conns = list(self._dockers.values()), list(self._conns.items())
            self._dockers.clear()
            self._conns.clear()
        for client in dockers:
            client.close()
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
