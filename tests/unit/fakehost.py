"""In-memory hosts and Kubernetes API for deploy tests: the `HostConnection` and `Docker` seams, faked.

A fake host keeps containers, images and files in dicts and refuses what Docker refuses (a second
container with a taken name, an image that was never pulled). Health answers come from what runs: a
component answers when its container runs and was not marked broken; etcd answers only while a quorum of
members runs, as a real cluster does. A started kubelet registers its Node with the fake API.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import shlex
import threading
import urllib.parse
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from rke_py.config.schema import Node
from rke_py.deploy.seeds import NAMESPACES, ROOT_CA
from rke_py.errors import ConnectError, UnreachableError
from rke_py.hosts.base import Completed, DockerContainer, DockerError
from rke_py.kube.api import KubeAPI, KubeAPIError
from rke_py.lab.kube.resources import resource_list
from rke_py.plan.model import ContainerSpec, FileSpec, RunConfig

_ids = itertools.count(1)


@dataclass
class FakeContainer:
    id: str
    name: str
    spec: ContainerSpec
    labels: dict[str, str]
    running: bool = False
    healthy: bool = True


def self_signed(name: str, days: int) -> bytes:
    """A DER certificate signed by its own (EC) key, valid `days` from now (negative: expired)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(days=400))
        .not_valid_after(now + dt.timedelta(days=days))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


@dataclass
class World:
    """What the fake hosts share: one event log, the etcd membership and the Kubernetes API."""

    events: list[str] = field(default_factory=list)
    etcd_hosts: list[str] = field(default_factory=list)
    down: set[str] = field(default_factory=set)  # addresses that cannot be reached
    hosts: dict[str, FakeHost] = field(default_factory=dict)
    kube: FakeKube = field(default_factory=lambda: FakeKube())
    kubelet_days: int = 365  # how long the certificate each kubelet signs itself is valid from now

    def __post_init__(self) -> None:
        self.kube.events = self.events

    def etcd_quorum(self) -> bool:
        running = sum(
            1
            for address in self.etcd_hosts
            if any(c.name == "etcd" and c.running for c in self.hosts[address].docker.by_id.values())
        )
        return running > len(self.etcd_hosts) // 2


DOCKER_VERSION = "24.0.7"  # what every fake host runs


class FakeDocker:
    def __init__(self, host: FakeHost):
        self.host = host
        self.by_id: dict[str, FakeContainer] = {}
        self.images: set[str] = set()
        self.broken: set[str] = set()  # component names whose new containers fail their health check
        self.pulls: list[tuple[str, Mapping[str, str] | None]] = []

    def _log(self, what: str) -> None:
        self.host.world.events.append(f"{self.host.address} {what}")

    def _find(self, ref: str) -> FakeContainer:
        for c in self.by_id.values():
            if ref in (c.id, c.name):
                return c
        raise DockerError(f"No such container: {ref}", missing=True)

    def info(self) -> dict[str, Any]:
        return {"Name": self.host.hostname, "ServerVersion": DOCKER_VERSION}

    def server_version(self) -> str:
        return DOCKER_VERSION

    def containers(self, label: str, names: Collection[str] = ()) -> list[DockerContainer]:
        return [
            DockerContainer(c.name, c.id, c.spec.image, c.running, dict(c.labels))
            for c in self.by_id.values()
            if label in c.labels or c.name in names
        ]

    def run_config(self, container: str) -> tuple[RunConfig, frozenset[str]]:
        """What it runs; the fake images set no environment."""
        return self._find(container).spec.run_config(), frozenset()

    def image_tags(self) -> set[str]:
        return set(self.images)

    def pull(self, image: str, auth: Mapping[str, str] | None) -> None:
        self.pulls.append((image, auth))
        self.images.add(image)

    def create(self, spec: ContainerSpec) -> str:
        if any(c.name == spec.name for c in self.by_id.values()):
            raise DockerError(f'Conflict. The container name "/{spec.name}" is already in use')
        if spec.image not in self.images:
            raise DockerError(f"No such image: {spec.image}", missing=True)
        cid = f"c{next(_ids)}"
        self.by_id[cid] = FakeContainer(
            cid, spec.name, spec, dict(spec.labels), healthy=spec.name not in self.broken
        )
        self._log(f"create {spec.name}")
        return cid

    def start(self, container: str) -> None:
        c = self._find(container)
        c.running = True
        self._log(f"start {c.name}")
        if c.name == "kubelet":
            self.host.world.kube.register(self.host.node)

    def stop(self, container: str, timeout: int = 5) -> None:
        c = self._find(container)
        c.running = False
        self._log(f"stop {c.name}")

    def rename(self, container: str, name: str) -> None:
        c = self._find(container)
        if any(other.name == name for other in self.by_id.values() if other is not c):
            raise DockerError(f'Conflict. The container name "/{name}" is already in use')
        self._log(f"rename {c.name} {name}")
        c.name = name

    def remove(self, container: str) -> None:
        c = self._find(container)
        del self.by_id[c.id]
        self._log(f"remove {c.name}")

    def never_stopped(self, container: str) -> bool:
        c = self._find(container)
        return c.running and c.healthy  # a broken component here is one that crashes

    def logs(self, container: str, tail: int) -> list[str]:
        return [f"{self._find(container).name}: the last line"]

    def exec(self, container: str, argv: list[str]) -> tuple[int, str]:
        self._log(f"exec {container} {shlex.join(argv)}")
        if argv[:3] == ["etcdctl", "member", "list"]:
            members = [
                {"ID": i + 1, "name": f"etcd-{a}", "peerURLs": [f"https://{a}:2380"]}
                for i, a in enumerate(self.host.world.etcd_hosts)
            ]
            return 0, json.dumps({"members": members})
        return 0, ""

    def names(self) -> dict[str, bool]:
        """name → running, of every container on the host."""
        return {c.name: c.running for c in self.by_id.values()}


class FakeHost:
    def __init__(self, world: World, node: Node, hostname: str = "", root: bool = True):
        self.world = world
        self.node = node
        self.root = root
        self.hostname = hostname or node.address
        self.docker = FakeDocker(self)
        self.files: dict[str, tuple[str, int]] = {}  # path -> sha256 of what was written, mode
        world.hosts[node.address] = self

    @property
    def address(self) -> str:
        return self.node.address

    def run(self, cmd: str, *, input: bytes | None = None, timeout: float = 60) -> Completed:
        """The two commands rke-py runs on a host: observe's facts script and clean-host's rm -rf."""
        if "rm -rf " in cmd:
            dirs = shlex.split(cmd.split("rm -rf ", 1)[1])
            self.files = {p: f for p, f in self.files.items() if not any(p.startswith(d + "/") for d in dirs)}
            return Completed(0, b"", b"")
        words = shlex.split(cmd.removeprefix("out=$(").split(";")[0])  # the script gathers its output
        hashes = self.file_hashes(words[2:] if words[:2] == ["sha256sum", "--"] else [])
        out = "".join(f"{h}  {p}\n" for p, h in hashes.items() if h)
        out += "--- ports\n--- df\n/dev/vda 263174212 23000000 209000000 10% /\n"
        out += f"--- hostname\n{self.hostname}\n"
        return Completed(0, out.encode(), b"")

    def run_as_root(self, script: str) -> Completed:
        return self.run(script)

    def write_files(self, files: Sequence[FileSpec]) -> None:
        for f in files:
            self.files[f.path] = (f.sha256, f.mode)

    def file_hashes(self, paths: list[str]) -> dict[str, str | None]:
        return {p: self.files[p][0] if p in self.files else None for p in paths}

    def https_get(
        self,
        url: str,
        *,
        ca_pem: bytes | None = None,
        cert_pem: bytes | None = None,
        key_pem: bytes | None = None,
        timeout: float = 5,
    ) -> tuple[int, bytes]:
        return self.http_get(url, timeout=timeout)

    def served_certificate(self, port: int) -> bytes:
        """A kubelet's own certificate, as one signs itself (a year, from when it first started)."""
        if "kubelet" not in self.docker.names():
            raise ConnectError(self.address, "tls", f"nothing serves on port {port}")
        return self_signed(self.node.hostname_override or self.address, self.world.kubelet_days)

    def http_get(self, url: str, *, timeout: float = 5) -> tuple[int, bytes]:
        for c in self.docker.by_id.values():
            health = c.spec.health
            if health is None or health.url != url:
                continue
            if not (c.running and c.healthy):
                continue
            if c.name == "etcd":
                return (200, b'{"health":"true"}') if self.world.etcd_quorum() else (503, b"no quorum")
            return 200, b"ok"
        raise ConnectionRefusedError(f"{url}: connection refused")  # nothing listens, as on a real host


class FakeKube(KubeAPI):
    """Nodes (GET one or all, merge PATCH of labels and taints, DELETE) and other objects (GET, apply).

    As on real Kubernetes, a kubelet with RKE's shared certificate registers its Node only once group
    system:nodes is bound to a role; until then it keeps trying."""

    def __init__(self, *, controllers_done: bool = True) -> None:
        self._resources = {}
        self._lock = threading.Lock()
        self._idle = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []
        self.waiting: list[Node] = []
        self.refused: list[str] = []  # nodes that tried to register before they were allowed to
        self.events: list[str] = []  # the World's event log once it owns this API
        # what the controller manager gives each namespace of a new cluster, unless it has not got to it
        for ns in NAMESPACES if controllers_done else ():
            self.objects[f"/api/v1/namespaces/{ns}/serviceaccounts/default"] = {
                "metadata": {"name": "default"}
            }
            self.objects[f"/api/v1/namespaces/{ns}/configmaps/{ROOT_CA}"] = {"metadata": {"name": ROOT_CA}}

    def nodes_allowed(self) -> bool:
        binding = self.objects.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:node")
        return binding is not None and {"kind": "Group", "name": "system:nodes"}.items() <= (
            binding["subjects"][0].items()
        )

    def register(self, node: Node) -> None:
        if not self.nodes_allowed():
            self.waiting.append(node)
            self.refused.append(node.name)
            return
        ready = {"conditions": [{"type": "Ready", "status": "True"}]}
        self.nodes.setdefault(
            node.name, {"metadata": {"name": node.name, "labels": {}}, "spec": {}, "status": ready}
        )

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        self.calls.append(f"{method} {path}")
        if path == "/api/v1/nodes" and method == "GET":
            return {"items": list(self.nodes.values())}
        if not path.startswith("/api/v1/nodes/"):
            return self._object(method, path, body, content_type)
        name = path.removeprefix("/api/v1/nodes/")
        if name not in self.nodes:
            raise KubeAPIError(f"{method} {path}: HTTP 404: not found", 404)
        node = self.nodes[name]
        if method == "DELETE":
            del self.nodes[name]
        elif method == "PATCH":  # a merge patch of labels and spec fields
            for part, held in (
                ((body.get("metadata") or {}).get("labels") or {}, node["metadata"]["labels"]),
                (body.get("spec") or {}, node["spec"]),
            ):
                for key, value in part.items():
                    if value is None:
                        held.pop(key, None)
                    else:
                        held[key] = value
            if "unschedulable" in (body.get("spec") or {}):
                self.events.append(f"kube {'cordon' if body['spec']['unschedulable'] else 'uncordon'} {name}")
        return node

    def _object(self, method: str, path: str, body: Any, content_type: str) -> Any:
        base, _, query = path.partition("?")
        if method == "GET" and (base == "/api/v1" or (base.count("/") == 3 and base.startswith("/apis/"))):
            group, _, version = base.removeprefix("/api").removeprefix("s/").rpartition("/")
            listing = resource_list("" if base == "/api/v1" else group, version)
            if listing is None:
                raise KubeAPIError(f"{method} {path}: HTTP 404: not found", 404)
            return listing
        if method == "GET" and base not in self.objects and "/namespaces/" not in base:  # a list
            label = urllib.parse.unquote(query.removeprefix("labelSelector="))
            plural = base.rsplit("/", 1)[1]
            items = [
                o
                for p, o in self.objects.items()
                if p.rsplit("/", 2)[1] == plural
                and (not label or label in (o["metadata"].get("labels") or {}))
            ]
            return {"items": items}
        if method == "DELETE" and base in self.objects:
            return self.objects.pop(base)
        if method == "PATCH" and content_type == "application/apply-patch+yaml" and "fieldManager=" in query:
            self.objects[base] = body
            waiting, self.waiting = self.waiting, []
            for node in waiting:
                self.register(node)
            return body
        if method == "GET" and base in self.objects:
            return self.objects[base]
        if method == "POST" and query == "dryRun=All" and base.endswith("/pods"):  # admission alone
            ns = base.split("/")[4]
            if f"/api/v1/namespaces/{ns}/serviceaccounts/default" not in self.objects:
                raise KubeAPIError(f"{method} {base}: HTTP 403: error looking up service account", 403)
            return body
        if method == "POST" and "dryRun" not in query:  # a create
            made = f"{base}/{body['metadata']['name']}"
            if made in self.objects:
                raise KubeAPIError(f"{method} {path}: HTTP 409: already exists", 409)
            self.objects[made] = body
            return body
        raise KubeAPIError(f"{method} {path}: HTTP 404: not found", 404)


class FakeConnector:
    def __init__(self, world: World):
        self.world = world

    def host(self, node: Node) -> FakeHost:
        if node.address in self.world.down:
            raise UnreachableError(node.address, "ssh", "connection timed out")
        return self.world.hosts[node.address]

    def kube_api(self, servers: list[str], identity: object = None) -> KubeAPI:
        return self.world.kube

    def learned_host_keys(self) -> dict[str, str]:
        return {}

    def close(self) -> None:
        pass
