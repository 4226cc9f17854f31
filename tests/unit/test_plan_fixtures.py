"""Data fixtures for the planner: `tests/fixtures/plan/<name>.yml` in, `<name>.json` (every node's files and
containers, without content hashes) and `<name>.nginx.conf` out.

Certificates differ on every run, so the expected files leave out what depends on them (file content
hashes, spec hashes); `test_plan_properties.py` covers the hashes. To regenerate the expected files after an
intended change, run `python tests/unit/test_plan_fixtures.py --update` and review the diff line by line.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from rke_py.config import load
from rke_py.pki.bundle import build_bundle
from rke_py.plan import build_plan
from rke_py.plan.model import ClusterPlan, FileSpec
from rke_py.plan.nginx_proxy import CONF_DIR
from tests.cases import fixture_cases

FIXTURES = Path(__file__).parent.parent / "fixtures" / "plan"
CASES = [p.stem for p in fixture_cases(FIXTURES)]


@cache
def planned(name: str) -> ClusterPlan:
    config = load(FIXTURES / f"{name}.yml").config
    return build_plan(config, build_bundle(config))


def file_data(spec: FileSpec) -> dict[str, Any]:
    """Path and mode; the content too for files the planner renders (not certificates or kubeconfigs)."""
    data: dict[str, Any] = {"path": spec.path, "mode": f"{spec.mode:04o}", "secret": spec.secret}
    if "/ssl/" not in spec.path and not spec.path.endswith("/nginx.conf"):
        data["content"] = spec.content.decode()
    return data


def describe(plan: ClusterPlan) -> list[dict[str, Any]]:
    """The plan as plain data, minus everything that depends on certificate content."""
    nodes = []
    for node in plan.nodes:
        containers = {}
        for placed in node.placed:
            data = asdict(placed.spec)
            del data["files_digest"]
            containers[placed.spec.name] = {"plane": placed.plane, **data}
        nodes.append(
            {
                "address": node.address,
                "hostname": node.hostname,
                "roles": list(node.roles),
                "files": [file_data(f) for f in node.files],
                "containers": containers,
            }
        )
    return json.loads(json.dumps(nodes))  # tuples become lists, as in the expected file


def nginx_confs(plan: ClusterPlan) -> set[str]:
    """Every distinct nginx.conf the plan writes (all nodes without an apiserver get the same one)."""
    suffix = f"{CONF_DIR}/nginx.conf"
    return {f.content.decode() for n in plan.nodes for f in n.files if f.path.endswith(suffix)}


@pytest.mark.parametrize("name", CASES)
def test_plan_matches_expected_containers_and_files(name: str) -> None:
    expected = json.loads((FIXTURES / f"{name}.json").read_text())
    assert describe(planned(name)) == expected


@pytest.mark.parametrize("name", CASES)
def test_nginx_conf_matches_expected(name: str) -> None:
    expected = FIXTURES / f"{name}.nginx.conf"
    confs = nginx_confs(planned(name))
    assert confs == ({expected.read_text()} if expected.exists() else set())


def update() -> None:
    for name in CASES:
        plan = planned(name)
        (FIXTURES / f"{name}.json").write_text(json.dumps(describe(plan), indent=2) + "\n")
        for conf in nginx_confs(plan):
            (FIXTURES / f"{name}.nginx.conf").write_text(conf)
        print(f"updated {name}")


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    update()
