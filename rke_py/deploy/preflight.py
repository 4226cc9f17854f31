"""Checks every host must pass before any host is changed."""

from __future__ import annotations

from rke_py.config.schema import ClusterConfig, Node
from rke_py.deploy.facts import HostFacts
from rke_py.errors import HostError
from rke_py.plan.components import REGISTRY, Component, port_owners

MIN_DOCKER = (20, 10)
MIN_DISK_MB = 1024
# Certificates made here are valid from now: a host behind refuses them, and tokens' times are checked
# across hosts. A clock kept by NTP is within a second.
MAX_CLOCK_OFFSET_S = 60


def preflight(
    config: ClusterConfig,
    node: Node,
    facts: HostFacts,
    registry: tuple[Component, ...] = REGISTRY,
    *,
    ignore_docker_version: bool = False,
    check_ports: bool = True,
) -> HostError | None:
    """The reasons this host cannot be changed safely, as one HostError, or None. `ignore_docker_version`
    and `check_ports`: RKE's --ignore-docker-version and --disable-port-check."""
    problems = []
    ignore_docker_version = ignore_docker_version or bool(config.ignore_docker_version)
    if not ignore_docker_version and _version(facts.docker_version) < MIN_DOCKER:
        problems.append(
            f"Docker {facts.docker_version or '?'} is older than {'.'.join(map(str, MIN_DOCKER))} "
            "(set ignore_docker_version: true or pass --ignore-docker-version to try anyway)"
        )
    owners = port_owners(registry)
    for component in registry if check_ports else ():
        if not component.runs_on(config, node):
            continue
        for port in component.ports:
            ours = any(o in facts.containers for o in owners[port])
            if port in facts.listening_ports and not ours:
                problems.append(f"port {port} (for {component.name}) is already in use by another program")
    if facts.disk_free_mb and facts.disk_free_mb < MIN_DISK_MB:
        problems.append(f"only {facts.disk_free_mb} MiB free under {config.prefix_path} (need {MIN_DISK_MB})")
    if facts.clock_offset_s is not None and abs(facts.clock_offset_s) > MAX_CLOCK_OFFSET_S:
        problems.append(_clock(facts.clock_offset_s))
    if problems:
        return HostError(facts.address, "preflight", "; ".join(problems))
    return None


def _version(text: str) -> tuple[int, int]:
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


def _clock(offset: float) -> str:
    minutes = round(abs(offset) / 60)
    amount = f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{max(minutes, 1)} min"
    return (
        f"its clock is {amount} {'ahead of' if offset > 0 else 'behind'} this machine's (more than "
        f"{MAX_CLOCK_OFFSET_S} s: certificates and tokens would not be valid on every host); set the time on "
        "both (NTP: chrony or systemd-timesyncd) and run again"
    )
