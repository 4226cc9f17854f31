"""Twin labs from one cluster.yml, one built by `rke up` (RKE v1.5 built here), one by `rke-py up`, both on
Rancher's images: every container on every host and every file the containers read, compared. Anything
that differs fails, but the departures the README lists."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rke_py.lab.state import Lab
from tests.lab.e2e import own_lab, up
from tests.rke import live, rke

pytestmark = [pytest.mark.lab, pytest.mark.rke, pytest.mark.rancher_images]

# what differs on purpose beyond the containers' plans (README, "Compared with RKE itself")
DEPARTURES = {
    **rke.DEPARTURES,
    r"nginx-proxy env: ": "rke-py renders the proxy's nginx.conf itself",
    r"/etc/kubernetes/nginx-proxy/nginx\.conf: only rke-py": "rke-py renders the proxy's nginx.conf itself",
    r'etcd-rolling-snapshots image: RKE ".*rke-tools:v0\.1\.103" rke-py ".*rke-tools:v0\.1\.102"': "the tag",
    r"cluster-state-deployer: only RKE": "RKE's helper, exited",
    r"kube-service-account-token\.pem: RKE": "RKE's is a copy of the apiserver's certificate",
}


@pytest.fixture(scope="module", params=[3, 5], ids=["3 nodes", "5 nodes"])
def twins(request, tmp_path_factory) -> Iterator[tuple[Lab, Lab]]:
    nodes = request.param
    with (
        own_lab(tmp_path_factory, f"rke{nodes}", nodes) as by_rke,
        own_lab(tmp_path_factory, f"ours{nodes}", nodes) as by_rke_py,
    ):
        rke.up(by_rke.cluster_yml)
        run = up(by_rke_py)
        assert run.code == 0, run.stderr
        yield by_rke, by_rke_py


def test_every_host_runs_what_rke_runs(twins: tuple[Lab, Lab]):
    by_rke, by_rke_py = twins
    for index in range(len(by_rke.hosts)):
        assert rke.unexplained(live.differences(by_rke, by_rke_py, index), DEPARTURES) == []
