"""`up` exiting 0 means the cluster takes work: a pipeline's `rke-py up && kubectl run ...` must never meet
a refusal. A new cluster is built again and again, and each time a bare Pod (not a Deployment, which would
retry) is created the moment `up` returns, and starts."""

from __future__ import annotations

import pytest

from tests.lab.e2e import cluster_args, kubectl, kubectl_run, own_lab, pause_image, rke_py, up

pytestmark = [pytest.mark.lab, pytest.mark.real_kubernetes]

ROUNDS = 5


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with own_lab(tmp_path_factory, "usable", 3) as made:
        yield made


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_the_first_pod_after_up_is_taken_and_starts(lab, round_: int):
    if round_:
        removed = rke_py("remove", "--force", *cluster_args(lab))
        assert removed.code == 0, removed.stderr
    run = up(lab)
    assert run.code == 0, run.stderr
    created = kubectl_run(lab, "run", f"first-{round_}", f"--image={pause_image(lab)}", "--restart=Never")
    assert created.returncode == 0, created.stderr  # e.g. serviceaccount "default" not found
    kubectl(lab, "wait", "--for=condition=Ready", f"pod/first-{round_}", "--timeout=60s")
