"""rke-py's containers against RKE's own: for every cluster.yml of the corpus (tests/fixtures/rke/), what
RKE v1.5 builds for each node (`cluster.BuildRKEConfigNodePlan`, through tests/rke/plan/main.go) and what
rke-py plans, field by field. Any difference fails but those listed in DEPARTURES, each on purpose and in
the README."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rke import rke

pytestmark = pytest.mark.rke

CORPUS = sorted((Path(__file__).parents[1] / "fixtures" / "rke").glob("*.yml"))
# RKE starts etcd-rolling-snapshots beside its plan (services.RunEtcdPlane): the live comparison covers it.
NOT_PLANNED_BY_RKE = "etcd-rolling-snapshots"


@pytest.mark.parametrize("cluster_yml", CORPUS, ids=lambda p: p.stem)
def test_rke_py_builds_the_containers_rke_builds(cluster_yml: Path):
    ours = rke.rke_py_plan(cluster_yml)
    for containers in ours.values():
        containers.pop(NOT_PLANNED_BY_RKE, None)
    assert rke.unexplained(rke.differences(rke.rke_plan(cluster_yml), ours)) == []
