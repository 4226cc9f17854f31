"""What a node must have: containers and files. Plain data, compared by value and by hash.

The spec hash is the contract between `plan` and `deploy`: it is stored in a label on every container
rke-py starts, and an equal hash means "leave it alone". It covers every field that shapes the container
and the content hash of every managed file the container reads, so a new nginx.conf replaces exactly the
nginx-proxy containers that mount it.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field, fields

import orjson

NAME_LABEL = "io.rancher.rke.container.name"  # RKE's own label, kept so RKE tooling recognises the containers
HASH_LABEL = "io.rke-py.spec-hash"
MANAGED_LABEL = "io.rke-py.managed"
# Environment variables that carry credentials (the kubelet's registry Docker config, the S3 keys of the
# recurring snapshots): never printed.
DOCKER_CONFIG_ENV = "RKE_KUBELET_DOCKER_CONFIG"
S3_KEY_ENV = ("S3_ACCESS_KEY", "S3_SECRET_KEY")
SECRET_ENV = frozenset({DOCKER_CONFIG_ENV, *S3_KEY_ENV})


@dataclass(frozen=True)
class FileSpec:
    """A file rke-py writes on a host before the containers that read it."""

    path: str  # absolute host path, prefix_path already applied
    content: bytes = field(repr=False)
    mode: int = 0o600
    secret: bool = False  # private keys: never printed, never logged

    @functools.cached_property  # frozen, and every container reading the file asks
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()


def flags_in_order(args: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """A command line as RKE's containers have it, compared: RKE builds the flags from a Go map, so their
    order is random; positional words keep their place, and a flag given twice keeps its own order."""
    words = [a for a in args if not a.startswith("--")]
    return (*words, *sorted((a for a in args if a.startswith("--")), key=lambda a: a.partition("=")[0]))


@dataclass(frozen=True)
class RunConfig:
    """What Docker shows a container runs, in the fields a ContainerSpec sets (and RKE sets too): how a
    container RKE started is told to be the one rke-py would start."""

    image: str
    entrypoint: tuple[str, ...]
    command: tuple[str, ...]
    env: frozenset[str]  # without what the image itself sets
    binds: frozenset[str]
    network_mode: str
    pid_mode: str
    privileged: bool
    restart_policy: str  # "" for none ("no")
    volumes_from: tuple[str, ...]
    user: str


@dataclass(frozen=True)
class HealthCheck:
    """How `deploy` and `verify` know a container is serving. Fetched from the node itself."""

    url: str  # e.g. https://localhost:6443/healthz
    client_cert: str = ""  # certificate bundle name presented as client cert ("" = none)
    expect_json: tuple[tuple[str, str], ...] = ()  # e.g. (("health", "true"),) for etcd
    retries: int = 10
    interval: float = 5.0


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    image: str
    entrypoint: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    env: tuple[str, ...] = ()  # "KEY=value"
    binds: tuple[str, ...] = ()  # "src:dst[:opts]"
    network_mode: str = "host"
    pid_mode: str = ""
    privileged: bool = False
    restart_policy: str = "always"  # "" for none
    volumes_from: tuple[str, ...] = ()
    user: str = ""
    # A shell script run as root on the host before the container is created (etcd's data and certificates
    # handed to its user); part of the spec, so a change to it runs it again.
    prepare: str = ""
    start: bool = True  # service-sidekick is created and never started, as in RKE
    # Host paths of managed files it reads when it starts: a new one replaces it.
    files: tuple[str, ...] = ()
    health: HealthCheck | None = None
    # Combined sha256 of `files` and of the containers in `volumes_from` (their volumes are theirs: a new
    # sidekick brings a new /opt/rke-tools), set by the planner.
    files_digest: str = ""

    def shown_env(self) -> list[str]:
        """`env` as output may show it: a secret's value is replaced by "(secret)"."""
        return [
            f"{e.partition('=')[0]}=(secret)" if e.partition("=")[0] in SECRET_ENV else e for e in self.env
        ]

    def spec_hash(self) -> str:
        """sha256 over every field that shapes the container, plus the content of the files it reads
        (how it is checked, `health`, does not change what runs). Kept once made: the spec is frozen."""
        known: str | None = self.__dict__.get("_hash")
        if known is None:
            blob = spec_json({name: self.__dict__[name] for name in _hashed_fields()})
            known = hashlib.sha256(blob).hexdigest()[:32]
            object.__setattr__(self, "_hash", known)
        return known

    @property
    def labels(self) -> dict[str, str]:
        return {NAME_LABEL: self.name, HASH_LABEL: self.spec_hash(), MANAGED_LABEL: "true"}

    def run_config(self, image_env: frozenset[str] = frozenset()) -> RunConfig:
        """What Docker would show for this spec, an image setting `image_env` itself."""
        return RunConfig(
            image=self.image,
            entrypoint=flags_in_order(self.entrypoint),
            command=flags_in_order(self.command),
            env=frozenset(self.env) - image_env,
            binds=frozenset(self.binds),
            network_mode=self.network_mode,
            pid_mode=self.pid_mode,
            privileged=self.privileged,
            restart_policy="" if self.restart_policy == "no" else self.restart_policy,
            volumes_from=self.volumes_from,
            user=self.user,
        )


_SPEC_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def spec_json(values: dict[str, object]) -> bytes:
    """The bytes a spec hash is taken over: json's compact, key-sorted, ASCII-escaped encoding of a spec's
    fields (strings, tuples of strings, booleans), which every label on a running container was made from.
    orjson writes the same bytes ten times faster wherever the text is printable ASCII; json itself writes
    what orjson would not escape as json does."""
    try:
        blob = orjson.dumps(values, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # what orjson does not take (an integer past 64 bits)
        blob = b"\x7f"
    if not blob.isascii() or b"\x7f" in blob:
        blob = _SPEC_JSON.encode(values).encode()
    return blob


@functools.cache
def _hashed_fields() -> tuple[str, ...]:
    return tuple(f.name for f in fields(ContainerSpec) if f.name != "health")


def files_digest(
    paths: tuple[str, ...], files: dict[str, FileSpec], volume_sources: tuple[ContainerSpec, ...] = ()
) -> str:
    """The combined content hash of `paths` (files the node plan writes) and of the spec hashes of the
    containers whose volumes it takes."""
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(path.encode() + b"\0" + files[path].sha256.encode() + b"\n")
    for source in volume_sources:
        h.update(b"volumes-from " + source.name.encode() + b"\0" + source.spec_hash().encode() + b"\n")
    return h.hexdigest()


@dataclass(frozen=True)
class Placed:
    """A container in the plane that starts it ("etcd", "control" or "worker")."""

    plane: str
    spec: ContainerSpec


@dataclass
class NodePlan:
    """Everything one node must have. Containers in start order: by plane, then in registry order."""

    address: str
    hostname: str
    roles: tuple[str, ...]
    files: list[FileSpec] = field(default_factory=list)
    placed: list[Placed] = field(default_factory=list)
    images: list[str] = field(default_factory=list)  # pulled by rke-py though no container of its runs them

    @property
    def containers(self) -> list[ContainerSpec]:
        return [p.spec for p in self.placed]

    def in_plane(self, plane: str) -> list[ContainerSpec]:
        return [p.spec for p in self.placed if p.plane == plane]

    def container(self, name: str) -> ContainerSpec | None:
        return next((s for s in self.containers if s.name == name), None)


@dataclass(frozen=True)
class ClusterPlan:
    nodes: list[NodePlan]
    by_address: dict[str, NodePlan] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # every phase looks nodes up by address, once a node: a scan each time would grow with the square
        object.__setattr__(self, "by_address", {n.address: n for n in self.nodes})

    def node(self, address: str) -> NodePlan:
        return self.by_address[address]
