"""Shared lab fixtures: real hosts (sshd + dockerd) as containers on the local Docker engine.

`lab` is one lab per session and size: 3 nodes unless a test asks for another size with
`@pytest.mark.parametrize("lab", [1], indirect=True)`. `lab_factory(nodes)` gives the same labs to code
that wants to choose the size itself. Every lab is removed at the end of the session.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from rke_py.lab import hosts
from rke_py.lab.state import LABEL, Lab

TEST_LAB = re.compile(r"^pytest(\d+)-")


def owned_lab_name(suffix: str) -> str:
    """A lab name owned by this test process, so a later session can tell it is left over."""
    return f"pytest{os.getpid()}-{suffix}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftover_test_labs(client: docker.DockerClient) -> None:
    """Take down labs of test sessions that died before their teardown (Ctrl-C, a killed CI job)."""
    names = {n.attrs["Labels"].get(LABEL, "") for n in client.networks.list(filters={"label": LABEL})}
    for name in names:
        match = TEST_LAB.match(name)
        if match and not _alive(int(match.group(1))):
            hosts.down(name)


def kube_binaries() -> Path | None:
    """Real Kubernetes server binaries for the lab (RKE_PY_KUBE_BINARIES); None: the stand-ins."""
    value = os.environ.get("RKE_PY_KUBE_BINARIES")
    return Path(value) if value else None


def cluster_images() -> dict[str, Path | None]:
    """What the lab builds the cluster's images from, as `hosts.up` takes it: real Kubernetes binaries,
    and with RKE_PY_RANCHER_IMAGES Rancher's own images instead of the lab's; neither: the stand-ins."""
    rancher = os.environ.get("RKE_PY_RANCHER_IMAGES")
    return {"binaries": kube_binaries(), "rancher_images": Path(rancher) if rancher else None}


def docker_available() -> bool:
    try:
        return bool(docker.from_env().ping())
    except docker.errors.DockerException:
        return False


@pytest.fixture(scope="session")
def lab_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[int], Lab]]:
    if not docker_available():
        pytest.skip("the lab needs a local Docker engine")
    remove_leftover_test_labs(docker.from_env())
    made: dict[int, Lab] = {}

    def make(nodes: int = 3) -> Lab:
        if nodes not in made:
            name = owned_lab_name(f"n{nodes}")
            directory = tmp_path_factory.mktemp("labs") / name
            made[nodes] = hosts.up(name, nodes, str(directory), **cluster_images())
        return made[nodes]

    yield make
    for lab in made.values():
        hosts.down(lab.name, str(lab.dir))


@pytest.fixture(scope="session")
def lab(request: pytest.FixtureRequest, lab_factory: Callable[[int], Lab]) -> Lab:
    """A running lab; `.cluster_yml`, `.hosts`, `.key_path` and `.known_hosts` are ready to use."""
    return lab_factory(getattr(request, "param", 3))


@pytest.fixture
def new_lab_name(request: pytest.FixtureRequest) -> str:
    """A name for a lab the test makes and removes itself (e.g. to test `lab down`)."""
    if not docker_available():
        pytest.skip("the lab needs a local Docker engine")
    return owned_lab_name(f"t{abs(hash(request.node.nodeid)) % 10**6}")
