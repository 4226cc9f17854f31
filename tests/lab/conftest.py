"""Shared lab fixtures: real hosts (sshd + dockerd) as containers on the local Docker engine.

`lab` is one lab per session and size: 3 nodes unless a test asks for another size with
`@pytest.mark.parametrize("lab", [1], indirect=True)`. `lab_factory(nodes)` gives the same labs to code
that wants to choose the size itself. Every lab is removed at the end of the session.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import docker
import pytest

from rke_py.lab import hosts
from rke_py.lab.state import Lab


def docker_available() -> bool:
    try:
        return bool(docker.from_env().ping())
    except docker.errors.DockerException:
        return False


@pytest.fixture(scope="session")
def lab_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[int], Lab]]:
    if not docker_available():
        pytest.skip("the lab needs a local Docker engine")
    made: dict[int, Lab] = {}

    def make(nodes: int = 3) -> Lab:
        if nodes not in made:
            name = f"pytest{os.getpid() % 100000}-n{nodes}"
            directory = tmp_path_factory.mktemp("labs") / name
            made[nodes] = hosts.up(name, nodes, str(directory))
        return made[nodes]

    yield make
    for lab in made.values():
        hosts.down(lab.name, str(lab.dir))


@pytest.fixture(scope="session")
def lab(request: pytest.FixtureRequest, lab_factory: Callable[[int], Lab]) -> Lab:
    """A running lab; `.cluster_yml`, `.hosts`, `.key_path` and `.known_hosts` are ready to use."""
    return lab_factory(getattr(request, "param", 3))
