"""The one place where rke-py changes anything: a host, or an object in the Kubernetes API.

`plan` prints the same actions this module executes.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from rke_py.deploy import actions as a
from rke_py.deploy import drain, seeds
from rke_py.deploy.facts import HostFacts
from rke_py.deploy.handover import serve_only
from rke_py.deploy.nodesync import node_patch
from rke_py.deploy.parallel import DEFAULT_CONCURRENCY
from rke_py.deploy.reconcile import add_etcd_member, clean_host, remove_etcd_members
from rke_py.errors import ApplyError
from rke_py.hosts.base import DockerError, HostConnection, last_logs, remove_if_present
from rke_py.kube.api import KubeAPI, KubeAPIError
from rke_py.pki.certs import CertKeyPair
from rke_py.plan import kube_apiserver, nginx_proxy
from rke_py.plan.components import BACKUP_PREFIX, REGISTRY, Component
from rke_py.plan.model import ContainerSpec, FileSpec
from rke_py.plan.registries import registry_of
from rke_py.verify.health import wait_healthy

log = logging.getLogger("rke_py.deploy")
NODE_READY_TIMEOUT = 120  # seconds a Node has to be Ready again after its kubelet was replaced
OBJECT_GONE_TIMEOUT = 60  # seconds an object deleted to be created anew has to be gone
PULLS_AT_ONCE = 4  # a host's images pulled side by side (each pull fetches its layers three at a time)
# "Error: ..." (cobra), klog's E/F lines, logrus' level=error/fatal
ERROR_LINE = re.compile(r"^(Error:|[EF]\d{4} |.*\blevel=(error|fatal)\b)")


@dataclass
class Target:
    """A connected host with what observe saw on it."""

    host: HostConnection
    facts: HostFacts
    prefix: str = "/"
    written: dict[str, str] = field(default_factory=dict)  # path -> sha256 of what this run wrote there

    def write_files(self, files: Sequence[FileSpec]) -> None:
        self.host.write_files(files)
        self.written.update((f.path, f.sha256) for f in files)

    def file_hashes(self) -> dict[str, str | None]:
        """What each file observed or written holds now, as far as this run knows: verify need not ask."""
        return {**self.facts.file_hashes, **self.written}

    @property
    def address(self) -> str:
        return self.host.address


@dataclass
class Applier:
    """Carries out actions. `api` gives the Kubernetes API when a cluster action needs it. At most
    `concurrency` host actions run at once, whichever phase runs them: hosts still being prepared in the
    background and the plane being changed share the bound."""

    bundle: Mapping[str, CertKeyPair]
    auth: Mapping[str, Mapping[str, str]]  # registry host → credentials for pulls
    api: Callable[[], KubeAPI]
    registry: tuple[Component, ...] = REGISTRY
    concurrency: int = DEFAULT_CONCURRENCY
    busy_patience: float = 0  # seconds a component that is plainly starting may take, if longer than its own
    slots: threading.BoundedSemaphore = field(init=False, repr=False)
    # set once an apiserver this run starts passes its health check: the API answers
    api_answers: threading.Event = field(default_factory=threading.Event, init=False, repr=False)

    def __post_init__(self) -> None:
        self.slots = threading.BoundedSemaphore(self.concurrency)

    def execute(self, action: a.Action, target: Target | None = None, *, wait: bool = True) -> None:
        """Carry out one action; on failure raise ApplyError naming the host (or object) and the step.

        Host actions need the `target` host; for add-member and remove-member that is the running etcd
        member the change goes through. `wait=False` starts a new container without waiting for its health
        check (or replaces a running one so): the members of a new etcd cluster, or of one getting a new CA,
        can only become healthy together.
        """
        if isinstance(action, a.ClusterAction):
            self._cluster(action)
            return
        assert target is not None, f"{action.describe()} needs a host"
        level = logging.DEBUG if isinstance(action, a.WriteFile) else logging.INFO  # dozens a host
        log.log(level, "%s: %s", target.address, action.describe())
        try:
            with self.slots:
                self._host(action, target, wait)
        except DockerError as exc:
            raise ApplyError(
                target.address, f"{action.phase}: {action.kind} {action.target}", str(exc)
            ) from exc

    def execute_all(self, actions: Sequence[a.HostAction], target: Target) -> None:
        """Carry out one host's actions in order; files written one after another go as one batch
        (`Host.write_files`: a few Docker calls, not two for each file, where a helper writes them), images
        pulled one after another are pulled side by side (a host's pulls wait on the registry and the
        network, not on each other), and so are containers that start beside the one before them
        (`Component.beside_previous`): their health checks are waited for together."""
        beside = {c.name for c in self.registry if c.beside_previous}
        for run in _runs(actions, beside):
            if isinstance(run[0], PREPARING):
                files = [x for x in run if isinstance(x, a.WriteFile)]
                if files:
                    self._write_files(files, target)
                self._side_by_side([x for x in run if isinstance(x, a.PullImage)], target, PULLS_AT_ONCE)
            else:
                self._side_by_side(run, target, len(run))

    def _side_by_side(self, actions: list[a.HostAction], target: Target, at_once: int) -> None:
        if len(actions) <= 1:
            for action in actions:
                self.execute(action, target)
            return
        with ThreadPoolExecutor(max_workers=min(at_once, len(actions))) as pool:
            done = [pool.submit(self.execute, action, target) for action in actions]
        for future in done:
            future.result()  # the first failure, named as a lone action's would be

    def _write_files(self, actions: list[a.WriteFile], target: Target) -> None:
        for action in actions:
            log.debug("%s: %s", target.address, action.describe())
        try:
            with self.slots:
                target.write_files([action.file for action in actions])
        except DockerError as exc:
            raise ApplyError(target.address, f"files: write {len(actions)} files", str(exc)) from exc

    def _host(self, action: a.HostAction, target: Target, wait: bool) -> None:
        docker = target.host.docker
        match action:
            case a.WriteFile(file=f):
                target.write_files([f])
            case a.PullImage(image=image):
                self._pull(target, image)
            case a.RemoveContainer(id=cid):
                remove_if_present(docker, cid)
            case a.RotateProxy(conf=conf, rkes=rkes):
                if not rkes:
                    target.write_files([conf])
                code, output = docker.exec(nginx_proxy.NAME, nginx_proxy.reload_command(conf, rkes))
                if code != 0:
                    raise DockerError(f"nginx reload failed: {output.strip()}")
            case a.RestoreContainer(name=name, id=cid, broken_id=broken):
                if broken:
                    docker.remove(broken)
                docker.rename(cid, name)
                docker.start(cid)
            case a.StartContainer(spec=spec, id=cid):
                docker.start(cid)
                if wait:
                    self._wait_healthy(target, spec)
            case a.CreateContainer(spec=spec):
                self._run_new(target, spec, wait)
            case a.ReplaceContainer():
                self._rolling_replace(target, action, wait)
            case a.AddMember(node=node):
                add_etcd_member(docker, target.address, node)
            case a.RemoveMember(node=node):
                remove_etcd_members(docker, target.address, [node])
            case a.CleanHost():
                clean_host(target.host, target.facts, target.prefix, self.registry)

    def _cluster(self, action: a.ClusterAction) -> None:
        log.info("cluster: %s", action.describe())
        api = self.api()
        try:
            match action:
                case a.ApplyObject(obj=obj, recreate=recreate):
                    if recreate:
                        api.delete_and_wait(api.object_path(obj), OBJECT_GONE_TIMEOUT)
                    api.apply(api.object_path(obj), obj)
                case a.SeedObject(obj=obj):
                    seeds.create(api, obj)
                case a.DeleteObject(until_gone=until_gone):
                    path = api.path(action.api_version, action.object_kind, action.name, action.namespace)
                    if until_gone:
                        api.delete_and_wait(path, OBJECT_GONE_TIMEOUT, "Foreground")
                    else:
                        api.delete(path)
                case a.ServeOnly():
                    serve_only(api, action, OBJECT_GONE_TIMEOUT)
                case a.RewriteSecrets():
                    rewrite_secrets(api)
                case a.RestartPods(namespace=namespace, selector=selector):
                    for pod in api.list("v1", "Pod", selector):
                        if pod["metadata"].get("namespace") == namespace:
                            api.delete(api.object_path(pod))
                case a.SyncNode(name=name, node=node):
                    path = f"/api/v1/nodes/{name}"
                    api.merge_patch(path, node_patch(node, api.get(path)))
                case a.DeleteNode(name=name):
                    api.request("DELETE", f"/api/v1/nodes/{name}")
                case a.Cordon(name=name):
                    drain.cordon(api, name, True)
                case a.Drain(name=name, options=options):
                    drain.drain(api, name, options)
                case a.Uncordon(name=name):
                    drain.wait_ready(api, name, NODE_READY_TIMEOUT)
                    drain.cordon(api, name, False)
        except KubeAPIError as exc:
            if isinstance(action, a.DeleteNode) and exc.status == 404:
                return  # already gone
            raise ApplyError("cluster", f"{action.kind} {action.target}", str(exc)) from exc

    def _pull(self, target: Target, image: str) -> None:
        started = time.monotonic()
        for attempt in range(3):  # RKE retries pulls three times
            try:
                target.host.docker.pull(image, self.auth.get(registry_of(image)))
                log.info("%s: pulled %s in %.1f s", target.address, image, time.monotonic() - started)
                return
            except DockerError:
                if attempt == 2:
                    raise
                time.sleep(1)

    def _run_new(self, target: Target, spec: ContainerSpec, wait: bool = True) -> str:
        if spec.prepare:
            done = target.host.run_as_root(spec.prepare)
            if done.rc != 0:
                output = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()
                raise ApplyError(
                    target.address, f"{spec.name}: preparing the host failed", "", log_tail=output[-10:]
                )
        cid = target.host.docker.create(spec)
        if spec.start:
            target.host.docker.start(cid)
            if wait:
                self._wait_healthy(target, spec, cid)
        return cid

    def _rolling_replace(self, target: Target, action: a.ReplaceContainer, wait: bool = True) -> None:
        """Stop and park the old container, start the new one, and put the old one back if it fails (with
        `wait`, also if it fails its health check)."""
        docker, spec = target.host.docker, action.spec
        backup = f"{BACKUP_PREFIX}{spec.name}"
        remove_if_present(docker, backup)  # left over from an interrupted run
        docker.stop(action.old_id, timeout=5)
        docker.rename(action.old_id, backup)
        try:
            self._run_new(target, spec, wait)
        except Exception:
            remove_if_present(docker, spec.name)
            docker.rename(action.old_id, spec.name)
            if action.old_running:
                docker.start(action.old_id)
            log.warning("%s: put the previous %s back", target.address, spec.name)
            raise
        # gone already is as good: a request of a run cut off by a lost network may arrive late
        remove_if_present(docker, action.old_id)

    def wait_for(self, target: Target, spec: ContainerSpec) -> None:
        """Wait for the container's health check, as one of the host actions running at once."""
        with self.slots:
            self._wait_healthy(target, spec)

    def _wait_healthy(self, target: Target, spec: ContainerSpec, cid: str = "") -> None:
        """Wait for the container's health check; fail with the last lines of its log."""
        if spec.health is None:
            return
        container = cid or spec.name

        def starting() -> bool:
            try:
                return target.host.docker.never_stopped(container)
            except DockerError:
                return False

        ok, detail = wait_healthy(target.host, spec.health, self.bundle, starting, self.busy_patience)
        if not ok:
            raise ApplyError(
                target.address,
                f"{spec.name}: health check failed",
                detail,
                log_tail=_log_tail(target, container),
            )
        if spec.name == kube_apiserver.NAME:
            self.api_answers.set()


PREPARING = (a.WriteFile, a.PullImage)
STARTING = (a.CreateContainer, a.ReplaceContainer, a.StartContainer)


def _runs(actions: Sequence[a.HostAction], beside: set[str]) -> list[list[a.HostAction]]:
    """A host's actions in order, cut where one must wait for those before it: files and pulls next to each
    other are one run, and so are containers starting beside the one before them; the rest one each."""
    runs: list[list[a.HostAction]] = []
    for action in actions:
        last = runs[-1][-1] if runs else None
        prepares = isinstance(action, PREPARING) and isinstance(last, PREPARING)
        starts = isinstance(action, STARTING) and action.spec.name in beside and isinstance(last, STARTING)
        if prepares or starts:
            runs[-1].append(action)
        else:
            runs.append([action])
    return runs


def _log_tail(target: Target, container: str, lines: int = 10, window: int = 300) -> list[str]:
    """The container's last lines, after the error lines of its recent output: a Kubernetes binary
    refusing a flag prints the reason first and pages of usage after it."""
    recent = last_logs(target.host.docker, container, window)
    last = recent[-lines:]
    errors = [line for line in dict.fromkeys(recent[:-lines]) if ERROR_LINE.match(line) and line not in last]
    return [*errors[-5:], "...", *last] if errors else last


def rewrite_secrets(api: KubeAPI, batch: int = 250) -> int:
    """Write every Secret back as it is, a page at a time (RKE's RewriteSecrets): the apiserver stores
    each anew with the first provider of its encryption config. A Secret changed meanwhile is read again;
    one deleted meanwhile needs nothing. Returns how many were written."""
    written, token = 0, ""
    while True:
        query = urllib.parse.urlencode({"limit": batch, **({"continue": token} if token else {})})
        page = api.get(f"/api/v1/secrets?{query}") or {}
        for secret in page.get("items", []):
            meta = secret["metadata"]
            path = f"/api/v1/namespaces/{meta['namespace']}/secrets/{meta['name']}"
            try:
                api.request("PUT", path, {"apiVersion": "v1", "kind": "Secret", **secret})
            except KubeAPIError as exc:
                if exc.status == 404:
                    continue
                if exc.status != 409:
                    raise
                api.request("PUT", path, api.get(path))
            written += 1
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return written
