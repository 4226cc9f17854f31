"""What a host has now, as plain data: the input `diff` compares with the plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from rke_py.plan.model import RunConfig


@dataclass(frozen=True)
class ObservedContainer:
    name: str
    id: str
    image: str
    running: bool
    spec_hash: str  # "" when the container was not started by rke-py (e.g. by RKE itself)
    # For a component rke-py did not start: what it runs, and what its image's environment is
    config: RunConfig | None = None
    image_env: frozenset[str] = frozenset()


@dataclass
class HostFacts:
    address: str
    hostname: str = ""  # the host's own hostname (docker info Name)
    docker_version: str = ""
    containers: dict[str, ObservedContainer] = field(default_factory=dict)  # the registry's components
    others: dict[str, ObservedContainer] = field(default_factory=dict)  # leftovers and RKE's kept containers
    images: set[str] = field(default_factory=set)
    file_hashes: dict[str, str | None] = field(default_factory=dict)
    listening_ports: set[int] = field(default_factory=set)
    disk_free_mb: int = 0
    clock_offset_s: float | None = None  # the host's clock minus this machine's (None: not read)
