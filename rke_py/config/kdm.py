"""RKE's Kontainer Driver Metadata (KDM), offline: the Kubernetes versions rke-py knows and their images.

`kdm-images.json` holds KDM's system images of the v1.27 to v1.30 lines RKE 1.6 ships (its source is named
in the file). KDM gives those lines the same service options (etcd 3.5 flags, `getKubeAPIOptions124`,
`getKubeletOptions124`, `getKubeControllerOptions127`, `getSchedulerOptions124`), which rke-py renders for
every version. The default is RKE v1.6.2's. Any other version works when cluster.yml's `system_images`
names the images rke-py runs, or when the cluster's state records them (a cluster RKE built on it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import NamedTuple

DEFAULT_K8S_VERSION = "v1.30.4-rancher1-1"

# The images rke-py itself runs; a version missing from the table needs at least these in system_images.
REQUIRED_IMAGES = (
    "etcd",
    "kubernetes",
    "alpine",
    "nginx_proxy",
    "kubernetes_services_sidecar",
    "pod_infra_container",
)


@cache
def _table() -> MappingProxyType[str, MappingProxyType[str, str]]:
    data = json.loads(resources.files("rke_py.config").joinpath("kdm-images.json").read_text())
    return MappingProxyType({v: MappingProxyType(images) for v, images in data["versions"].items()})


def versions() -> list[str]:
    """Every Kubernetes version rke-py knows images for, oldest first."""
    return sorted(_table(), key=version_key)


def latest_per_minor() -> list[str]:
    """The newest known version of each minor line, as `rke config --list-version --all` prints them."""
    newest: dict[tuple[int, ...], str] = {}
    for version in versions():
        newest[version_key(version)[:2]] = version
    return list(newest.values())


class Recorded(NamedTuple):
    """The images a cluster's state records for the version it runs: the table for a version rke-py does
    not list (RKE's later lines, v1.31 and v1.32), so such a cluster is taken over on the images it runs."""

    version: str
    images: Mapping[str, str]


def system_images(version: str, recorded: Recorded | None = None) -> Mapping[str, str] | None:
    """The default images for `version`, or None when rke-py does not know it and no state records them."""
    if (listed := _table().get(version)) is not None:
        return listed
    return recorded.images if recorded and recorded.version == version and recorded.images else None


_VERSION = re.compile(
    r"v(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?\Z",
    re.ASCII,
)
_RANCHER = re.compile(r"-rancher([0-9]{1,9})(?:-([0-9]{1,9}))?\Z", re.ASCII)


def parse_version(text: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a `vX.Y.Z[-pre][+build]` version, or None when it is not one."""
    match = _VERSION.match(text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def version_key(text: str) -> tuple[int, ...]:
    """An order for RKE's versions: major, minor, patch, then the rancher and package revisions
    (v1.28.8-rancher2-1 after v1.28.8-rancher1-2). Unparsable text sorts first."""
    parsed = parse_version(text)
    if parsed is None:
        return (-1,)
    rancher = _RANCHER.search(text)
    revisions = (int(rancher[1]), int(rancher[2] or 0)) if rancher else (0, 0)
    return (*parsed, *revisions)
