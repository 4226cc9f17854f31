"""A run cut off anywhere is finished by the next one. rke-py is stopped with SIGINT (Ctrl-C), SIGTERM (a
cancelled CI job) or SIGKILL (a crash) as it begins each phase of a fresh `up` and of a rolling change of
every component, and a few seconds into the long phases; a busy apiserver (frozen for longer than one
request may take) is waited for. After each: no traceback, the exit code says how the run ended, and a plain
`up` converges: every check green, the change made, a value written before the fault still there, and no
container parked or left twice. The README's "When a run is cut off" says the same to users.

CI runs three points, one for each signal, in both kinds of run (the whole matrix takes about 9 minutes
on the stand-ins, more than CI can spare); RKE_PY_FAULTS=all runs every point."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from itertools import cycle

import pytest

from rke_py.deploy.up import EtcdPlane, Kubeconfig, Plane, PrepareHosts, SaveState, Verify
from rke_py.lab.state import Lab
from rke_py.plan.components import BACKUP_PREFIX
from tests.lab.e2e import (
    cluster_args,
    containers_on,
    edit_cluster_yml,
    host_exec,
    kubectl,
    own_lab,
    rke_py,
    up,
)

pytestmark = pytest.mark.lab

EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -signal.SIGKILL}
CONTROL, WORKER = Plane.TITLES["control"], Plane.TITLES["worker"]
# (phase title, seconds into it): each phase a fresh `up` announces from the first change on, and the long
# ones again a moment after they begin
FRESH = [
    (PrepareHosts.title, 0),
    (PrepareHosts.title, 2),
    (EtcdPlane.title, 0),
    (EtcdPlane.title, 3),
    (CONTROL, 0),
    (CONTROL, 3),
    (Kubeconfig.title, 0),
    (WORKER, 0),
    (WORKER, 2),
    (SaveState.TITLES[True], 0),
    (Verify.title, 0),
]
# a change of every component's flags: the planes roll one host at a time
ROLLING = [
    (EtcdPlane.title, 0),
    (EtcdPlane.title, 4),
    (CONTROL, 0),
    (CONTROL, 4),
    (WORKER, 0),
    (WORKER, 2),
    (SaveState.TITLES[True], 0),
    (Verify.title, 0),
]
FLAGGED = {  # cluster.yml service -> (container, its flag that the change sets)
    "etcd": ("etcd", "quota-backend-bytes"),
    "kube-api": ("kube-apiserver", "v"),
    "kube-controller": ("kube-controller-manager", "v"),
    "scheduler": ("kube-scheduler", "v"),
    "kubelet": ("kubelet", "v"),
    "kubeproxy": ("kube-proxy", "v"),
}


def points(cuts: list[tuple[str, float]]) -> list[tuple[str, float, signal.Signals]]:
    """Each cut with the next signal in turn, so each signal meets every kind of phase."""
    return [(phase, after, sig) for (phase, after), sig in zip(cuts, cycle(EXIT), strict=False)]


FULL = os.environ.get("RKE_PY_FAULTS") == "all"
FRESH_POINTS = points(FRESH) if FULL else [points(FRESH)[i] for i in (1, 5)]
ROLLING_POINTS = points(ROLLING) if FULL else [points(ROLLING)[3]]
BUSY = [("waited-for", ())] + ([("no-patience", ("--api-timeout", "0"))] if FULL else [])


def point_id(point: tuple[str, float, signal.Signals]) -> str:
    phase, after, sig = point
    return f"{sig.name}-{phase.split(':')[0].split(',')[0].replace(' ', '_')}+{after}s"


def up_until(
    lab: Lab, phase: str, then: Callable[[subprocess.Popen[str]], None], *extra: str
) -> tuple[int, str]:
    """`rke-py up EXTRA`, and `then(process)` once it announces `phase`: (exit code, stderr). Fails the
    test when the run ends before the phase begins."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rke_py", "up", *cluster_args(lab, *extra)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.rstrip().endswith(f"phase: {phase}"):
            then(proc)
            break
    else:
        pytest.fail(f"up ended ({proc.wait()}) before phase {phase!r}:\n{''.join(seen)[-3000:]}")
    seen.append(proc.stderr.read())
    return proc.wait(timeout=600), "".join(seen)


def cut_off(lab: Lab, phase: str, sig: signal.Signals, after: float) -> tuple[int, str]:
    """`rke-py up`, sent `sig` `after` seconds into `phase`."""

    def stop(proc: subprocess.Popen[str]) -> None:
        time.sleep(after)
        proc.send_signal(sig)

    return up_until(lab, phase, stop)


def remove(lab: Lab) -> None:
    """The cluster gone, for a fresh `up`."""
    removed = rke_py("remove", "--force", *cluster_args(lab))
    assert removed.code == 0, removed.stderr[-3000:]


def converged(lab: Lab) -> None:
    """A plain `up` finishes the cut-off run: every check green, nothing parked, no container twice."""
    run = up(lab)
    assert run.code == 0, run.stderr[-3000:]
    assert run.json()["ok"] is True, run.json()["verify"]
    for index in range(len(lab.hosts)):
        names = host_exec(lab, index, "docker ps -a --format '{{.Names}}'").split()
        assert not [n for n in names if n.startswith(BACKUP_PREFIX)], names
        assert len(names) == len(set(names)), names
    assert up(lab).json()["changed"] == 0  # and nothing is left for a third run


def flags(value: int):
    """cluster.yml changed so that every component's container changes: each one's flag set to `value`."""

    def change(data: dict) -> None:
        services = data.setdefault("services", {})
        for service, (_, flag) in FLAGGED.items():
            level = str(2**31 + value) if flag == "quota-backend-bytes" else str(value)
            services.setdefault(service, {}).setdefault("extra_args", {})[flag] = level

    return change


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    with own_lab(tmp_path_factory, "faults", 3) as made:
        yield made


def stopped_as_told(code: int, stderr: str, sig: signal.Signals) -> None:
    assert code == EXIT[sig], stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    if sig != signal.SIGKILL:
        assert "run the command again to finish what it began" in stderr.splitlines()[-1], stderr[-3000:]


@pytest.mark.parametrize("point", FRESH_POINTS, ids=point_id)
def test_a_fresh_up_cut_off_anywhere_is_finished_by_the_next(lab, point):
    phase, after, sig = point
    remove(lab)
    stopped_as_told(*cut_off(lab, phase, sig, after), sig)
    converged(lab)


@pytest.mark.parametrize("point", ROLLING_POINTS, ids=point_id)
def test_a_rolling_change_cut_off_anywhere_is_finished_by_the_next(lab, point):
    phase, after, sig = point
    if "configmap/before-fault" not in kubectl(lab, "get", "configmap", "-o", "name").split():
        assert up(lab).code == 0
        kubectl(lab, "create", "configmap", "before-fault", "--from-literal=kept=yes")
    value = 1 + points(ROLLING).index(point)
    edit_cluster_yml(lab, flags(value))
    stopped_as_told(*cut_off(lab, phase, sig, after), sig)
    converged(lab)
    assert kubectl(lab, "get", "configmap", "before-fault", "-o", "jsonpath={.data.kept}") == "yes"
    for index in range(len(lab.hosts)):
        running = containers_on(lab, index)
        for container, flag in FLAGGED.values():
            if container in running:
                args = host_exec(lab, index, f"docker inspect -f '{{{{json .Args}}}}' {container}")
                level = 2**31 + value if flag == "quota-backend-bytes" else value
                assert f'"--{flag}={level}"' in args, (index, container, args)


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> Iterator[Lab]:
    """One host: one apiserver, as the Vagrant path's one controlplane machine."""
    with own_lab(tmp_path_factory, "busy", 1) as made:
        yield made


def up_with_apiservers_frozen(lab: Lab, seconds: float, *extra: str) -> tuple[int, str]:
    """A fresh `up` whose apiservers all stop answering (frozen: they take connections and say nothing)
    for `seconds` once the control plane is up, as one whose etcd stalls on a slow disk does; longer than
    one request may take (kube.api.REQUEST_TIMEOUT)."""

    def freeze(proc: subprocess.Popen[str]) -> None:
        for index in range(len(lab.hosts)):
            host_exec(lab, index, "docker pause kube-apiserver")
        thawed = time.monotonic() + seconds
        while time.monotonic() < thawed and proc.poll() is None:
            time.sleep(0.5)
        for index in range(len(lab.hosts)):
            host_exec(lab, index, "docker unpause kube-apiserver")

    remove(lab)
    return up_until(lab, Kubeconfig.title, freeze, *extra)


@pytest.mark.parametrize(("case", "extra"), BUSY, ids=[case for case, _ in BUSY])
def test_an_apiserver_too_busy_to_answer_for_longer_than_one_request(single, case, extra):
    """Waited for, retries logged; with --api-timeout 0 the run fails at the first request's timeout, as
    every run did before rke-py retried, naming the call and how long it asked."""
    code, stderr = up_with_apiservers_frozen(single, 35, *extra)
    if not extra:
        assert code == 0, stderr[-3000:]
        assert "the apiserver is busy" in stderr and "asking again in" in stderr, stderr[-3000:]
    else:
        assert code == 5, stderr[-3000:]
        last = stderr.strip().splitlines()[-1]
        assert "no apiserver answered" in last and "asked 1 times in 30 s" in last, last
    converged(single)
