"""The one place where rke-py changes a host. `plan` prints the same actions this module executes."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import docker
from docker.errors import APIError, NotFound

from rke_py.deploy.actions import Action
from rke_py.deploy.facts import HostFacts
from rke_py.deploy.reconcile import add_etcd_member, clean_host, remove_etcd_members
from rke_py.errors import ApplyError
from rke_py.pki.certs import CertKeyPair
from rke_py.plan.model import ContainerSpec
from rke_py.verify.health import wait_healthy

log = logging.getLogger("rke_py.deploy")


@dataclass
class Target:
    """A connected host: its name for messages, its connection, its Docker client and what it has."""

    address: str
    conn: object
    docker: docker.DockerClient
    facts: HostFacts
    prefix: str = "/"


def execute(
    target: Target,
    action: Action,
    bundle: Mapping[str, CertKeyPair],
    auth: Mapping[str, dict],
    *,
    wait: bool = True,
) -> None:
    """Carry out one action; on failure raise ApplyError naming the host, the step and the log tail.

    `wait=False` starts a new container without waiting for its health check: the members of a new etcd
    cluster can only become healthy together.
    """
    level = logging.DEBUG if action.kind == "write-file" else logging.INFO  # dozens a host: log file only
    log.log(level, "%s: %s", target.address, action.describe())
    try:
        if action.kind == "write-file":
            f = action.file
            target.conn.write_file(f.path, f.content, f.mode)
        elif action.kind == "pull-image":
            _pull(target.docker, action.target, auth)
        elif action.kind == "remove":
            _remove(target.docker, target.facts.containers[action.target].id)
        elif action.kind == "start":
            target.docker.api.start(target.facts.containers[action.target].id)
            if wait:
                wait_for(target, action.spec, bundle)
        elif action.kind == "create":
            _run_new(target, action.spec, bundle, wait)
        elif action.kind == "replace":
            _rolling_replace(target, action.spec, bundle)
        elif action.kind == "add-member":
            add_etcd_member(target.docker, target.address, action.node)
        elif action.kind == "remove-member":
            remove_etcd_members(target.docker, target.address, [action.node])
        elif action.kind == "clean-host":
            clean_host(target.docker, target.conn.run, target.prefix)
    except ApplyError:
        raise
    except (APIError, OSError) as exc:
        raise ApplyError(target.address, f"{action.plane}: {action.kind} {action.target}", str(exc)) from exc


def _pull(client: docker.DockerClient, image: str, auth: Mapping[str, dict]) -> None:
    for attempt in range(3):  # RKE retries pulls three times
        try:
            client.api.pull(image, auth_config=auth.get(registry_of(image)))
            return
        except APIError:
            if attempt == 2:
                raise


def registry_of(image: str) -> str:
    """The registry host an image reference names (Docker's rule: a first part with '.' or ':')."""
    first, sep, _ = image.partition("/")
    return first if sep and ("." in first or ":" in first or first == "localhost") else "docker.io"


def _create(client: docker.DockerClient, spec: ContainerSpec) -> str:
    host_config = client.api.create_host_config(
        binds=list(spec.binds) or None,
        network_mode=spec.network_mode,
        pid_mode=spec.pid_mode or None,
        privileged=spec.privileged,
        restart_policy={"Name": spec.restart_policy} if spec.restart_policy else None,
        volumes_from=list(spec.volumes_from) or None,
    )
    created = client.api.create_container(
        image=spec.image,
        name=spec.name,
        entrypoint=list(spec.entrypoint) or None,
        command=list(spec.command) or None,
        environment=list(spec.env),
        labels=spec.labels,
        user=spec.user or None,
        host_config=host_config,
    )
    return created["Id"]


def _run_new(
    target: Target, spec: ContainerSpec, bundle: Mapping[str, CertKeyPair], wait: bool = True
) -> str:
    cid = _create(target.docker, spec)
    if spec.start:
        target.docker.api.start(cid)
        if wait:
            wait_for(target, spec, bundle, cid)
    return cid


def _rolling_replace(target: Target, spec: ContainerSpec, bundle: Mapping[str, CertKeyPair]) -> None:
    """Stop and rename the old container, start the new one, and put the old one back if it fails."""
    client = target.docker
    old = target.facts.containers[spec.name]
    backup = f"old-{spec.name}"
    _remove_by_name(client, backup)  # left over from an interrupted run
    client.api.stop(old.id, timeout=5)
    client.api.rename(old.id, backup)
    try:
        _run_new(target, spec, bundle)
    except Exception:
        _remove_by_name(client, spec.name)
        client.api.rename(old.id, spec.name)
        if old.running:
            client.api.start(old.id)
        log.warning("%s: put the previous %s back", target.address, spec.name, extra={"host": target.address})
        raise
    _remove(client, old.id)


def wait_for(target: Target, spec: ContainerSpec, bundle: Mapping[str, CertKeyPair], cid: str = "") -> None:
    """Wait for the container's health check; fail with the last lines of its log."""
    if spec.health is None:
        return
    ok, detail = wait_healthy(target.conn, spec.health, bundle)
    if not ok:
        raise ApplyError(
            target.address,
            f"{spec.name}: health check failed",
            detail,
            log_tail=_log_tail(target.docker, cid or spec.name),
        )


def _log_tail(client: docker.DockerClient, container: str, lines: int = 10) -> list[str]:
    try:
        raw = client.api.logs(container, tail=lines)
    except APIError:
        return []
    return raw.decode(errors="replace").splitlines()[-lines:]


def _remove(client: docker.DockerClient, cid: str) -> None:
    client.api.remove_container(cid, force=True, v=False)


def _remove_by_name(client: docker.DockerClient, name: str) -> None:
    with contextlib.suppress(NotFound):
        client.api.remove_container(name, force=True)
