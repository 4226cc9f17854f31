"""Writing a starting `cluster.yml`: commented, readable, and accepted by `rke_py.config.load_text` as is.

`rke-py config` (from `--node` options, prompts, or a Vagrant lab) and the Vagrant lab's README share the
rules here, so a file written by one path looks like a file written by another. Defaults come from
`rke_py.config.defaults`, the same values the loader fills in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver

from rke_py.config import defaults, kdm
from rke_py.config.schema import ROLES
from rke_py.errors import UsageError
from rke_py.templating import template

DEFAULT_USER = "ubuntu"  # what `rke config` offers; cloud images of Ubuntu log in as this user
CONFIG_MODE = 0o640  # what `rke config` writes: no secrets inside, but not for everyone either
NODE_SYNTAX = "ADDRESS:ROLE[,ROLE][@USER]"


@dataclass
class NodeInput:
    """One host as the user described it; empty strings mean "leave the key out, RKE's default applies"."""

    address: str
    roles: list[str]
    user: str = DEFAULT_USER
    port: int = 22
    ssh_key_path: str = ""
    internal_address: str = ""
    hostname_override: str = ""
    docker_socket: str = ""
    comment: str = ""  # one line written above the node, e.g. which Vagrant machine it is

    def __post_init__(self) -> None:
        unknown = [role for role in self.roles if role not in ROLES]
        if unknown or not self.roles:
            what = f'unknown role "{unknown[0]}"' if unknown else "no role"
            raise UsageError(f"{what} for {self.address}; a role is one of {', '.join(ROLES)}")


@dataclass
class ClusterInput:
    """The cluster-wide answers `rke config` asks for, defaulted as RKE defaults them."""

    cluster_name: str = defaults.CLUSTER_NAME
    ssh_key_path: str = defaults.SSH_KEY_PATH
    kubernetes_version: str | None = None  # None: leave it to rke-py's default (written as a comment)
    network_plugin: str = defaults.NETWORK_PLUGIN
    authentication_strategy: str = defaults.AUTH_STRATEGY
    authorization_mode: str = defaults.AUTHZ_MODE
    cluster_domain: str = defaults.CLUSTER_DOMAIN
    service_cluster_ip_range: str = defaults.SERVICE_CLUSTER_IP_RANGE
    cluster_cidr: str = defaults.CLUSTER_CIDR
    cluster_dns_server: str = defaults.CLUSTER_DNS_SERVER
    written_by: str = "rke-py config"  # the command, quoted in the header so the file can be made again


def roles_by_count(count: int) -> list[list[str]]:
    """Roles for `count` hosts in order: the rule `--from-vagrant`, the prompts and the lab share.

    One host does everything; with two, the second only runs workloads (a second etcd member would not
    survive more failures than one); three are three equal all-role nodes (an etcd quorum, and workers,
    which rke-py requires); from four on, the first three form the etcd quorum and the control plane and
    the rest are workers.
    """
    return [_roles(index, count) for index in range(count)]


def _roles(index: int, count: int) -> list[str]:
    if count <= 3:
        return list(ROLES) if index == 0 or count == 3 else ["worker"]
    return ["etcd", "controlplane"] if index < 3 else ["worker"]


def parse_node_option(text: str) -> NodeInput:
    """`--node 10.0.0.1:etcd,controlplane@admin` -> NodeInput; the last ":" splits, so IPv6 works."""
    spec, at, user = text.rpartition("@") if "@" in text else (text, "", DEFAULT_USER)
    address, colon, roles = spec.rpartition(":")
    if not colon or not address or not roles or (at and not user):
        raise UsageError(f'--node "{text}" is not {NODE_SYNTAX}, e.g. 192.168.56.11:etcd,controlplane,worker')
    return NodeInput(address=address.strip("[]"), roles=roles.split(","), user=user)


def render_cluster_yml(nodes: list[NodeInput], *, cluster: ClusterInput | None = None, **fields: Any) -> str:
    """A commented cluster.yml for `nodes`; `fields` override ClusterInput's (e.g. cluster_name="lab")."""
    settings = dataclasses.replace(cluster or ClusterInput(), **fields)
    return template("cluster.yml.j2", {"y": yaml_scalar}).render(
        nodes=nodes,
        cluster=settings,
        default_version=kdm.DEFAULT_K8S_VERSION,
        node_port_range=defaults.SERVICE_NODE_PORT_RANGE,
        example_images=_example_images(),
    )


def _example_images() -> list[tuple[str, str]]:
    """The images rke-py runs for its default version: what an air-gapped registry must hold at least."""
    images: Mapping[str, str] = kdm.system_images(kdm.DEFAULT_K8S_VERSION) or {}
    return [(key, images[key]) for key in kdm.REQUIRED_IMAGES if key in images]


def write_config_file(path: str | os.PathLike[str], text: str, *, force: bool = False) -> None:
    """Write `text` to `path` with mode 0640; refuse to replace an existing file unless `force`.

    Without `force` the file is created with O_EXCL, so a file appearing meanwhile is not clobbered either;
    with it, a temporary file is renamed over the old one, so a failure leaves the old file intact.
    """
    target = Path(path)
    try:
        if force:
            _replace(target, text)
        else:
            _create(target, text)
    except FileExistsError:
        raise UsageError(f"{target} already exists; pass --force to overwrite it") from None
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None


def _create(target: Path, text: str) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, CONFIG_MODE)
    try:
        _fill(fd, text)
    except BaseException:
        target.unlink(missing_ok=True)  # no half-written file that would block the next try
        raise


def _replace(target: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        _fill(fd, text)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _fill(fd: int, text: str) -> None:
    # fchmod: the documented mode regardless of the umask (mkstemp creates 0600).
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), CONFIG_MODE)
        f.write(text)


_PLAIN = re.compile(r"(?!-$)[A-Za-z0-9_./~+-][A-Za-z0-9_./~+@:=-]*(?<!:)")
_STR = "tag:yaml.org,2002:str"
# yaml.v2 (RKE) reads YAML 1.1, where `yes` and `0755` are not strings; ruamel reads 1.2: both must agree.
_RESOLVERS = (VersionedResolver(version=(1, 1)), VersionedResolver(version=(1, 2)))


def yaml_scalar(value: object) -> str:
    """`value` as a YAML scalar: plain when every YAML reader sees that same string, else double-quoted.

    Keeps the file readable (`address: 192.168.56.11`) while `"22"`, `"yes"`, `"~"` and paths with spaces
    come out quoted, so each value loads as the string it was. JSON strings are YAML double-quoted scalars.
    """
    text = str(value)
    plain = _PLAIN.fullmatch(text) and all(
        str(resolver.resolve(ScalarNode, text, (True, False))) == _STR for resolver in _RESOLVERS
    )
    return text if plain else json.dumps(text, ensure_ascii=False)
