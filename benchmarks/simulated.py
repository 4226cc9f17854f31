"""Simulated hosts and Kubernetes API for the scale benchmark: the unit tests' in-memory hosts
(`tests/unit/fakehost.py`) behind the same `Connector` seam, with the latency and the contents of real ones.

Every call waits as many network round trips as the real transport makes for it (`ROUND_TRIPS`) and is
counted. The hosts hold what a real node holds besides rke-py's containers (the images of its pods), the
API renews its leader Leases and reports add-on rollouts done, as real controllers would. What is not
simulated: the CPU rke-py spends in SSH and TLS cryptography (paramiko, ssl), which the lab measures.

The simulation's own CPU (the fake Docker, the fake API's bookkeeping and JSON, the wrappers that count
rke-py's calls and track the critical path) is measured and kept apart, so `Meter.sim_cpu` can be
subtracted from the process's CPU to leave rke-py's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import heapq
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rke_py.config.schema import Node
from rke_py.kube.api import KubeAPI, KubeAPIError
from rke_py.lab.kube import validation
from rke_py.verify.checks import LEASES
from tests.unit.fakehost import FakeDocker, FakeHost, FakeKube, World

# Round trips per call, as rke-py's real transport makes them over one SSH connection (paramiko channels
# on one transport; the Docker API on a pool of kept-alive channels; TLS 1.3 handshakes in one round trip).
ROUND_TRIPS = {
    "connect": 8,  # TCP, banners, key exchange (2), auth service and key, Docker's /version (2)
    "id -u": 2,  # asked at connect when the SSH user is not root
    "run": 2,  # open a session channel; exec, its output and exit status
    "run_as_root": 2,
    "file_hashes": 2,  # one sha256sum command
    "write_files": 2,  # one command for the whole batch: a tar on its stdin, extracted and renamed
    "https_get": 3,  # a direct-tcpip channel, the TLS handshake, the request
    "http_get": 2,
    "served_certificate": 2,  # a direct-tcpip channel and the TLS handshake
    "docker": 1,  # a request on a kept-alive channel to the Docker socket
    "api": 3,  # a channel to the apiserver, the TLS handshake, the request
}
KNOWN_AT_CONNECT = {"server_version"}  # Docker's answer to the version negotiation of "connect"
POD_IMAGES = 40  # images a real node holds for its pods, listed by every `docker images`


class CriticalPath:
    """The least wall time a run's simulated round trips allow: each thread carries a clock that only
    round trips advance; work handed to a thread pool starts at its submitter's clock or when one of the
    pool's `max_workers` slots frees (so `--concurrency` still bounds it), and whoever waits for a result
    takes the later of its own clock and the work's. The main thread's clock at the end is the floor: the
    run's critical path with rke-py's own CPU and sleeps taken away. This bookkeeping wraps every
    `submit` and `result` of rke-py's: its CPU (`cpu()`) is the simulation's, not rke-py's."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._spent: list[list[float]] = []  # a cell per thread, so charging takes no lock

    def charge(self, started: float) -> None:
        cell = getattr(self._local, "spent", None)
        if cell is None:
            cell = self._local.spent = [0.0]
            self._spent.append(cell)
        cell[0] += time.thread_time() - started

    def cpu(self) -> float:
        return sum(cell[0] for cell in self._spent)

    def now(self) -> float:
        return getattr(self._local, "clock", 0.0)

    def restart(self) -> None:
        self._local.clock = 0.0
        for cell in self._spent:
            cell[0] = 0.0

    def advance(self, seconds: float) -> None:
        self._local.clock = self.now() + seconds

    def _reach(self, clock: float) -> None:
        self._local.clock = max(self.now(), clock)

    def install(self) -> None:
        """Patch thread pools and futures in this process (the benchmark's own child process)."""
        submit, result = ThreadPoolExecutor.submit, Future.result
        path = self

        def tracked_submit(pool: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kw: Any) -> Any:
            started = time.thread_time()
            slots = pool.__dict__.setdefault("_floor_slots", [0.0] * pool._max_workers)
            lock = pool.__dict__.setdefault("_floor_lock", threading.Lock())
            submitted, finished = path.now(), [0.0]

            def task() -> Any:
                started = time.thread_time()
                with lock:
                    free = heapq.heappop(slots)
                path._local.clock = max(submitted, free)
                path.charge(started)
                try:
                    return fn(*args, **kw)
                finally:
                    started = time.thread_time()
                    finished[0] = path.now()
                    with lock:
                        heapq.heappush(slots, finished[0])
                    path.charge(started)

            path.charge(started)
            future = submit(pool, task)
            future._floor_finished = finished  # type: ignore[attr-defined]
            return future

        def tracked(wait: Callable[..., Any]) -> Callable[..., Any]:
            def waited(future: Future[Any], timeout: float | None = None) -> Any:
                try:
                    return wait(future, timeout)
                finally:
                    started = time.thread_time()
                    if future.done() and hasattr(future, "_floor_finished"):
                        path._reach(future._floor_finished[0])
                    path.charge(started)

            return waited

        def stamped(setter: Callable[..., Any]) -> Callable[..., Any]:
            """A future rke-py sets itself carries the clock of the thread that set it."""

            def set(future: Future[Any], value: Any) -> Any:
                if not hasattr(future, "_floor_finished"):
                    future._floor_finished = [path.now()]  # type: ignore[attr-defined]
                return setter(future, value)

            return set

        ThreadPoolExecutor.submit = tracked_submit  # type: ignore[method-assign]
        Future.result = tracked(result)  # type: ignore[method-assign]
        Future.exception = tracked(Future.exception)  # type: ignore[method-assign]
        Future.set_result = stamped(Future.set_result)  # type: ignore[method-assign]
        Future.set_exception = stamped(Future.set_exception)  # type: ignore[method-assign]


@dataclass
class Meter:
    """Counts calls, waits their latency, and tracks how many hosts have a call in flight at once."""

    latency: float  # seconds per round trip
    counts: Counter[str] = field(default_factory=Counter)
    answer_cpu: float = 0.0  # CPU seconds the simulated hosts and API spent answering
    peak_hosts: int = 0  # the most hosts with a call in flight at one moment
    path: CriticalPath = field(default_factory=CriticalPath)
    _busy: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def sim_cpu(self) -> float:
        """All the simulation's CPU: its answers and its bookkeeping around rke-py's calls."""
        return self.answer_cpu + self.path.cpu()

    @contextlib.contextmanager
    def call(self, counter: str, address: str, round_trips: int) -> Iterator[None]:
        """The simulated host's answer and this bookkeeping count as the simulation's CPU, not rke-py's."""
        started = time.thread_time()
        with self._lock:
            self.counts[counter] += 1
            if address:
                self._busy[address] += 1
                self.peak_hosts = max(self.peak_hosts, len(self._busy))
        try:
            if self.latency:
                time.sleep(self.latency * round_trips)
                self.path.advance(self.latency * round_trips)
            yield
        finally:
            with self._lock:
                if address:
                    self._busy[address] -= 1
                    if not self._busy[address]:
                        del self._busy[address]
                self.answer_cpu += time.thread_time() - started

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.answer_cpu = 0.0
            self.peak_hosts = 0
        self.path.restart()


class SimDocker(FakeDocker):
    """A fake Docker whose controller-manager and scheduler take their leader Lease when they start."""

    def start(self, container: str) -> None:
        super().start(container)
        name = self._find(container).name
        if name in LEASES:
            self.host.world.kube.leaders.setdefault(name, self.host.hostname)


class SimHost(FakeHost):
    """A fake host that also holds its pods' images, as a real node does."""

    def __init__(self, world: World, node: Node):
        super().__init__(world, node)
        self.docker = SimDocker(self)
        self.docker.images.update(f"registry.example/app-{i}:v1" for i in range(POD_IMAGES))


class SimKube(FakeKube):
    """The fake API with what a real cluster adds: the apiserver's refusals (the lab's stand-in rules),
    leader Leases renewed as they are read, add-on DaemonSets and Deployments rolled out when applied."""

    def __init__(self) -> None:
        super().__init__()
        self.leaders: dict[str, str] = {}  # lease name -> holder's hostname

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        lease = path.rsplit("/", 1)[-1]
        if method == "GET" and "/leases/" in path and lease in self.leaders:
            now = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
            holder = f"{self.leaders[lease]}_0f3c"
            return {"spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": now}}
        refused = (
            validation.problems(body["kind"], body) if method == "PATCH" and "kind" in (body or {}) else []
        )
        if refused:
            raise KubeAPIError(f"{method} {path}: HTTP 422: {'; '.join(refused)}", 422)
        result = super().request(method, path, body, content_type)
        if (
            method == "PATCH"
            and isinstance(result, dict)
            and result.get("kind") in ("DaemonSet", "Deployment")
        ):
            wanted = len(self.nodes) if result["kind"] == "DaemonSet" else result["spec"].get("replicas", 1)
            result["metadata"]["generation"] = 1
            result["status"] = {
                "observedGeneration": 1,
                **dict.fromkeys(("desiredNumberScheduled", "numberReady", "updatedNumberScheduled"), wanted),
                **dict.fromkeys(("readyReplicas", "updatedReplicas"), wanted),
            }
        return result


class Metered:
    """Any host-side object with each method call counted under `counter` and delayed by its round trips."""

    def __init__(self, target: Any, meter: Meter, address: str, counter: str):
        self._target = target
        self._meter = meter
        self._address = address
        self._counter = counter
        if counter == "ssh_commands":
            self.docker = Metered(target.docker, meter, address, "docker_calls")

    def __getattr__(self, name: str) -> Any:
        """A real connection's method is a plain attribute: this wrapping is the simulation's CPU."""
        started = time.thread_time()
        try:
            value = getattr(self._target, name)
            if not callable(value) or name in KNOWN_AT_CONNECT:
                return value
            trips = ROUND_TRIPS["docker"] if self._counter == "docker_calls" else ROUND_TRIPS[name]

            def call(*args: Any, **kwargs: Any) -> Any:
                with self._meter.call(self._counter, self._address, trips):
                    return value(*args, **kwargs)

            return call
        finally:
            self._meter.path.charge(started)


class SimClient(KubeAPI):
    """A client of the simulated API: JSON both ways as a real client sends and reads it, and its own
    discovery cache, as each rke-py process has."""

    def __init__(self, server: SimKube, meter: Meter):
        self._resources = {}
        self._lock = threading.Lock()
        self.server = server
        self.meter = meter

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        sent = json.dumps(body) if body is not None else None
        with self.meter.call("api_requests", "", ROUND_TRIPS["api"]), self.server._lock:
            answer = json.dumps(self.server.request(method, path, sent and json.loads(sent), content_type))
        return json.loads(answer)


class SimConnector:
    """The `Connector` of one rke-py run: one simulated SSH connection per host, opened on first use."""

    def __init__(self, world: World, meter: Meter):
        self.world = world
        self.meter = meter
        self._hosts: dict[str, Metered] = {}
        self._lock = threading.Lock()

    def host(self, node: Node) -> Metered:
        with self._lock:
            known = self._hosts.get(node.address)
        if known is not None:
            return known
        trips = ROUND_TRIPS["connect"] + (ROUND_TRIPS["id -u"] if node.user != "root" else 0)
        with self.meter.call("ssh_sessions", node.address, trips):
            host = Metered(self.world.hosts[node.address], self.meter, node.address, "ssh_commands")
        with self._lock:
            return self._hosts.setdefault(node.address, host)

    def kube_api(self, servers: list[str], identity: Any = None) -> KubeAPI:
        assert isinstance(self.world.kube, SimKube)
        return SimClient(self.world.kube, self.meter)

    def learned_host_keys(self) -> dict[str, str]:
        return {}

    def close(self) -> None:
        self._hosts.clear()


def sim_world() -> World:
    return World(kube=SimKube())


def add_hosts(world: World, nodes: list[Node]) -> None:
    world.etcd_hosts += [n.address for n in nodes if n.has("etcd")]
    for node in nodes:
        SimHost(world, node)


def connector_factory(world: World, meter: Meter) -> Callable[..., SimConnector]:
    """What stands in for `SSHConnector(desired, options)`: every run gets a new connector."""
    return lambda desired, options: SimConnector(world, meter)
