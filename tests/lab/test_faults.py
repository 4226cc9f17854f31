"""A run cut off anywhere is finished by the next one. rke-py is stopped with SIGINT (Ctrl-C), SIGTERM (a
cancelled CI job) or SIGKILL (a crash) as it begins each phase of a fresh `up`, of a rolling change of
every component, of `cert rotate`, `encrypt rotate-key` and snapshot save and restore, and a few seconds
into the long phases; a busy apiserver (frozen for longer than one request may take) is waited for; a host
loses Docker, power, its SSH sessions or its network in the middle of a rolling change, a fresh `up`, an
upgrade, a rotation or a restore; a disk fills; a clock is hours off. After each: no traceback, the exit
code and message say how the run ended and where, and a plain `up` (or the cut-off command again)
converges: every check green, the change made, a value written before the fault still there, on real
Kubernetes the pods that ran before still running, and no container parked or left twice. The README's
"When a run is cut off" says the same to users.

CI runs one point for each signal (a fresh `up`, a rolling change, a restore) and a host restarted (in a
rolling change and a restore); the whole matrix takes about 50 minutes on the stand-ins, more than CI can
spare: RKE_PY_FAULTS=all runs it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import count, cycle

import docker
import pytest
from ruamel.yaml import YAML

from rke_py.deploy.up import EtcdPlane, Kubeconfig, Plane, PrepareHosts, SaveState, Verify
from rke_py.lab import hosts, registry
from rke_py.lab.state import Lab
from rke_py.plan.components import BACKUP_PREFIX
from tests.lab.conftest import kube_binaries
from tests.lab.e2e import (
    cluster_args,
    containers_on,
    edit_cluster_yml,
    host_exec,
    kubectl,
    kubectl_run,
    own_lab,
    pause_image,
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
FRESH_POINTS = points(FRESH) if FULL else [points(FRESH)[1]]
ROLLING_POINTS = points(ROLLING) if FULL else [points(ROLLING)[3]]
# a rolling change of flags at every point, and an upgrade cut off as its control and worker planes roll
ROLLING_CUTS = [("flags", p) for p in ROLLING_POINTS] + (
    [("upgrade", p) for p in points([(CONTROL, 4), (WORKER, 1)])] if FULL else []
)
SNAPSHOTS = "/opt/rke/etcd-snapshots"
RUN_BOUND_S = 300  # the longest a run may go on once a host is lost (README, "When a run is cut off")
REAL = bool(kube_binaries())
# a pod on every node, running while the faults strike (RUNNING: as value_written last saw them, by lab)
STEADY = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: steady, namespace: default}}
spec:
  selector: {{matchLabels: {{app: steady}}}}
  template:
    metadata: {{labels: {{app: steady}}}}
    spec:
      tolerations: [{{operator: Exists}}]
      containers: [{{name: steady, image: "{image}"}}]
"""
RUNNING: dict[str, dict[str, tuple[str, int]]] = {}
BUSY = [("waited-for", ())] + ([("no-patience", ("--api-timeout", "0"))] if FULL else [])


def point_id(point: tuple[str, float, signal.Signals]) -> str:
    phase, after, sig = point
    return f"{sig.name}-{phase.split(':')[0].split(',')[0].replace(' ', '_')}+{after}s"


def up_until(
    lab: Lab, phase: str, then: Callable[[subprocess.Popen[str]], None], *extra: str, command: str = "up"
) -> tuple[int, str]:
    """`rke-py COMMAND EXTRA` (words), and `then(process)` once it announces `phase`: (exit code, stderr).
    Fails the test when the run ends before the phase begins."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rke_py", *command.split(), *cluster_args(lab, *extra)],
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
            break
    else:
        pytest.fail(f"up ended ({proc.wait()}) before phase {phase!r}:\n{''.join(seen)[-3000:]}")
    rest = threading.Thread(target=lambda: seen.append(proc.stderr.read()))  # never a full pipe
    rest.start()
    then(proc)
    code = proc.wait(timeout=600)
    rest.join()
    return code, "".join(seen)


@contextlib.contextmanager
def held_still(proc: subprocess.Popen[str]) -> Iterator[None]:
    """`proc` stopped (SIGSTOP) for the block, so what it does next meets what the block set up."""
    proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGCONT)


def cut_off(lab: Lab, phase: str, sig: signal.Signals, after: float, command: str = "up") -> tuple[int, str]:
    """`rke-py COMMAND`, sent `sig` `after` seconds into `phase`."""

    def stop(proc: subprocess.Popen[str]) -> None:
        time.sleep(after)
        proc.send_signal(sig)

    return up_until(lab, phase, stop, command=command)


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


def value_written(lab: Lab) -> None:
    """A running cluster with a value in etcd that must outlive the fault, and on real Kubernetes a pod on
    every node (the stand-ins run none), all checked by `data_kept`."""
    if kubectl_run(lab, "get", "configmap", "before-fault").returncode != 0:
        assert up(lab).code == 0
        kubectl(lab, "create", "configmap", "before-fault", "--from-literal=kept=yes")
    if REAL:
        kubectl(lab, "apply", "-f", "-", stdin=STEADY.format(image=pause_image(lab)))
        RUNNING[lab.name] = steady_pods(lab)


def steady_pods(lab: Lab) -> dict[str, tuple[str, int]]:
    """Once every node runs its steady pod: pod UID -> (node, restarts)."""
    kubectl(lab, "rollout", "status", "daemonset/steady", "--timeout=180s")
    listed = json.loads(kubectl(lab, "get", "pods", "-l", "app=steady", "-o", "json"))["items"]
    return {
        p["metadata"]["uid"]: (p["spec"]["nodeName"], p["status"]["containerStatuses"][0]["restartCount"])
        for p in listed
    }


def data_kept(lab: Lab, struck: int | None = None) -> None:
    """etcd's value is still there; the pods that ran before are the ones running now, and none restarted
    but on the host a fault `struck` (its containers die with its Docker or power)."""
    assert kubectl(lab, "get", "configmap", "before-fault", "-o", "jsonpath={.data.kept}") == "yes"
    if REAL:
        before, now = RUNNING[lab.name], steady_pods(lab)
        assert now.keys() == before.keys(), (before, now)
        hit = lab.hosts[struck].name if struck is not None else None
        restarted = {uid: now[uid] for uid, (node, restarts) in before.items() if now[uid][1] != restarts}
        assert all(node == hit for node, _ in restarted.values()), (before, restarted)


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


@pytest.mark.parametrize(
    ("change", "point"), ROLLING_CUTS, ids=[f"{c}-{point_id(p)}" for c, p in ROLLING_CUTS]
)
def test_a_rolling_change_cut_off_anywhere_is_finished_by_the_next(lab, change, point):
    """Every component's flags changed, or every Kubernetes container's image (an upgrade)."""
    phase, after, sig = point
    if change == "upgrade":
        image_upgraded(lab)
    else:
        value_written(lab)
        edit_cluster_yml(lab, flags(value := next(FLAG_VALUES)))
    stopped_as_told(*cut_off(lab, phase, sig, after), sig)
    converged(lab)
    data_kept(lab)
    wanted = YAML().load(lab.cluster_yml.read_text()).get("system_images", {}).get("kubernetes", "")
    for index in range(len(lab.hosts)):
        running = containers_on(lab, index)
        for container, flag in FLAGGED.values():
            if container not in running:
                continue
            if change == "upgrade":
                image = host_exec(lab, index, f"docker inspect -f '{{{{.Config.Image}}}}' {container}")
                assert container == "etcd" or image.strip().endswith(wanted), (index, container, image)
            else:
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
    for `seconds`, as one whose etcd stalls on a slow disk does; longer than one request may take
    (kube.api.REQUEST_TIMEOUT). They freeze as the cluster state is saved, so the next request, storing it
    in the cluster, meets them frozen (a new cluster's RBAC goes in while the control plane starts, so
    from the kubeconfig to here nothing asks the API). `up` itself is held still (SIGSTOP) while they
    freeze, so that request cannot slip past."""

    def freeze(proc: subprocess.Popen[str]) -> None:
        with held_still(proc):
            for index in range(len(lab.hosts)):
                host_exec(lab, index, "docker pause kube-apiserver")
        thawed = time.monotonic() + seconds
        while time.monotonic() < thawed and proc.poll() is None:
            time.sleep(0.5)
        for index in range(len(lab.hosts)):
            host_exec(lab, index, "docker unpause kube-apiserver")

    remove(lab)
    return up_until(lab, SaveState.TITLES[True], freeze, *extra)


def test_a_docker_frozen_past_one_request_is_asked_again_and_remove_finishes(single):
    """A slow host's Docker gives no answer for longer than one request may take (dockerd stopped for 60 s
    as `remove` connects, so every call it makes meets the frozen daemon): the calls are asked again, each
    retry logged, and `remove` finishes, where before it failed on the first, with nothing left behind (the
    next test's fresh `up` builds on that)."""

    def freeze(proc: subprocess.Popen[str]) -> None:
        host_exec(single, 0, "kill -STOP $(cat /run/docker.pid)")
        thawed = time.monotonic() + 60
        while time.monotonic() < thawed and proc.poll() is None:
            time.sleep(0.5)
        host_exec(single, 0, "kill -CONT $(cat /run/docker.pid)")

    converged(single)  # a cluster to remove, also when this test runs alone
    code, stderr = up_until(single, "connecting to every host", freeze, "--force", command="remove")
    assert code == 0, stderr[-3000:]
    assert "Docker is busy (no answer in 50 s); asking again" in stderr, stderr[-3000:]
    assert not host_exec(single, 0, "docker ps -aq --filter label=io.rancher.rke.container.name").split()


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


def test_status_asks_a_frozen_apiserver_again_and_is_green_once_it_answers(single):
    """The apiserver paused for 12 s as `status` begins: its probe gets no answer in 5 s, is asked again
    (logged), and `status` exits 0 once it answers, where before it reported the cluster unhealthy."""
    converged(single)  # a cluster, also when this test runs alone
    host_exec(single, 0, "docker pause kube-apiserver")
    thaw = threading.Timer(12, host_exec, (single, 0, "docker unpause kube-apiserver"))
    thaw.start()
    try:
        run = rke_py("status", *cluster_args(single, "--output", "json"))
    finally:
        thaw.join()
    assert run.code == 0, run.stderr[-3000:]
    assert "no answer in time from kube-apiserver" in run.stderr, run.stderr[-3000:]
    assert json.loads(run.stdout)["ok"] is True


# What happens to a host in the middle of a run (each returns the undo, once the run ended)


def docker_stopped(lab: Lab, index: int) -> Callable[[], None]:
    """Docker stopped as `systemctl stop docker` does (its containers stop); the undo starts it again."""
    host_exec(
        lab,
        index,
        "touch /run/docker-stopped; pid=$(cat /run/docker.pid); kill -TERM $pid; "
        "while kill -0 $pid 2>/dev/null; do sleep 0.2; done",
    )

    def start() -> None:
        host_exec(lab, index, "rm -f /run/docker-stopped")
        hosts.wait_ready(lab.hosts[index])

    return start


def host_restarted(lab: Lab, index: int) -> Callable[[], None]:
    """The machine killed (power off) and started again a few seconds later."""
    machine = docker.from_env().containers.get(lab.hosts[index].name)
    machine.kill()
    time.sleep(5)
    machine.reload()
    if machine.status != "running":  # its restart policy may have started it already
        machine.start()
    return lambda: hosts.wait_ready(lab.hosts[index])


def ssh_cut(lab: Lab, index: int) -> Callable[[], None]:
    """Every SSH session to the host killed (sshd itself still listens, its children are the logins): a
    reset connection. The lab's busybox has no pkill."""
    logins = "ps -o pid,ppid | awk -v l=\"$(cat /run/sshd.pid)\" '$2 == l {print $1}'"
    host_exec(lab, index, f"kill -KILL $({logins})")
    return lambda: None


def network_cut(lab: Lab, index: int) -> Callable[[], None]:
    """The host taken off the network (packets dropped, nothing refused); the undo puts it back."""
    network = docker.from_env().networks.get(lab.network)
    network.disconnect(lab.hosts[index].name)

    def back() -> None:
        network.connect(lab.hosts[index].name, ipv4_address=lab.hosts[index].address)
        hosts.wait_ready(lab.hosts[index])

    return back


def error_said(stderr: str) -> str:
    """The error line a user reads (`error: HOST: STEP: CAUSE`), before any container's last log lines."""
    return next((line[len("error: ") :] for line in stderr.splitlines() if line.startswith("error: ")), "")


def test_a_full_disk_under_etc_kubernetes_is_named_and_the_next_up_finishes(lab):
    """The disk holding /etc/kubernetes full (a tiny tmpfs over it, hiding the files there, so the run must
    write them again): the run names the host and the disk, and once there is room the next up finishes."""
    value_written(lab)
    full = lab.hosts[2]
    host_exec(lab, 2, "mount -t tmpfs -o size=8k tmpfs /etc/kubernetes")
    try:
        run = up(lab)
    finally:
        host_exec(lab, 2, "umount /etc/kubernetes")
    assert run.code == 5 and "Traceback" not in run.stderr, run.stderr[-3000:]
    said = error_said(run.stderr)
    assert (
        said.startswith(f"{full.address}: ") and "no space left on the disk holding /etc/kubernetes" in said
    ), run.stderr[-3000:]
    converged(lab)
    data_kept(lab)


def test_a_full_snapshot_directory_is_named_and_the_snapshots_there_kept(lab):
    value_written(lab)
    assert rke_py("etcd", "snapshot-save", "--name", "before-full", *cluster_args(lab)).code == 0
    host_exec(lab, 0, f"mount -t tmpfs -o size=64k tmpfs {SNAPSHOTS}")
    try:
        failed = rke_py("etcd", "snapshot-save", "--name", "full", *cluster_args(lab))
    finally:
        host_exec(lab, 0, f"umount {SNAPSHOTS}")
    assert failed.code == 5 and "Traceback" not in failed.stderr, failed.stderr[-3000:]
    said = error_said(failed.stderr)
    assert (
        said.startswith(f"{lab.hosts[0].address}: ")
        and f"no space left on the disk holding {SNAPSHOTS}" in said
    ), failed.stderr[-3000:]
    saved = rke_py("etcd", "snapshot-save", "--name", "after-full", *cluster_args(lab))
    assert saved.code == 0, saved.stderr[-3000:]
    kept = host_exec(lab, 0, f"ls {SNAPSHOTS}")
    assert "before-full" in kept and "after-full" in kept, kept


SKEWED_SHELL = """#!/bin/sh
date() { /bin/busybox date -d "@$(( $(/bin/busybox date +%s) - 18000 ))" "$@"; }
[ "$1" = -c ] && eval "$2"
"""


def test_a_host_clock_hours_off_is_refused_before_any_change(lab):
    """As the host reports it: root's login shell there answers `date` five hours behind (a container
    cannot set its own clock, and the lab's busybox shell runs `date` as a builtin, past any PATH);
    preflight names the host and the way out, and nothing is changed."""
    value_written(lab)
    before = containers_on(lab, 1)
    host_exec(
        lab,
        1,
        f"cat >/usr/local/bin/skewed <<'EOF'\n{SKEWED_SHELL}EOF\nchmod +x /usr/local/bin/skewed; "
        "sed -i 's|^root:\\(.*\\):/bin/sh$|root:\\1:/usr/local/bin/skewed|' /etc/passwd",
    )
    try:
        refused = up(lab)
    finally:
        host_exec(lab, 1, "sed -i 's|:/usr/local/bin/skewed$|:/bin/sh|' /etc/passwd")
    assert refused.code == 4, refused.stderr[-3000:]
    assert f"{lab.hosts[1].address}: preflight: its clock is 5 h 0 min behind" in refused.stderr
    assert containers_on(lab, 1) == before
    assert up(lab).code == 0


# The other commands that change the cluster, cut off in their own phases: (command, phase, seconds in)
REWRITE = "rewriting every Secret under the encryption config"
RESTORE = "etcd snapshot-restore --name before-cut --force"
COMMAND_CUTS = [
    ("cert rotate", EtcdPlane.title, 2),
    ("cert rotate", CONTROL, 0),
    ("cert rotate", WORKER, 1),
    ("encrypt rotate-key", CONTROL, 2),
    ("encrypt rotate-key", REWRITE, 0),
    ("etcd snapshot-save --name cut", "saving snapshot cut from a healthy etcd member", 0),
    ("etcd snapshot-save --name cut", "writing the archive to every etcd host", 0),
    (RESTORE, "stopping etcd and the Kubernetes components", 0),
    (RESTORE, "restoring every etcd member from the snapshot", 1),
    (RESTORE, EtcdPlane.title, 0),
]
COMMAND_POINTS = [(*cut, sig) for cut, sig in zip(COMMAND_CUTS, cycle(EXIT), strict=False)]
if not FULL:  # a restore killed while it restores the members
    COMMAND_POINTS = [COMMAND_POINTS[8]]


def encrypted(lab: Lab) -> None:
    """Secrets encryption on (`encrypt rotate-key` needs it), once."""
    with open(lab.cluster_yml) as f:
        if "secrets_encryption_config" in f.read():
            return
    edit_cluster_yml(
        lab,
        lambda d: (
            d.setdefault("services", {})
            .setdefault("kube-api", {})
            .update(secrets_encryption_config={"enabled": True})
        ),
    )
    assert up(lab).code == 0


@pytest.mark.parametrize(
    "point", COMMAND_POINTS, ids=lambda p: f"{p[0].split(' --')[0].replace(' ', '-')}-{point_id(p[1:])}"
)
def test_any_command_cut_off_anywhere_is_finished_by_running_it_again(lab, point):
    """Run again, the command finishes what it began; then `up` converges with etcd's data intact. A
    restore run again restores the snapshot, and keeps aside the data from before the first attempt."""
    command, phase, after, sig = point
    value_written(lab)
    if command == RESTORE:
        if "before-cut" not in rke_py("etcd", "snapshot-list", *cluster_args(lab)).stdout:
            assert rke_py("etcd", "snapshot-save", "--name", "before-cut", *cluster_args(lab)).code == 0
        kubectl(lab, "create", "configmap", "after-snapshot", "--from-literal=gone=soon")
    if command.startswith("encrypt"):
        encrypted(lab)
    stopped_as_told(*cut_off(lab, phase, sig, after, command=command), sig)
    again = rke_py(*command.split(), *cluster_args(lab))
    assert again.code == 0, again.stderr[-3000:]
    converged(lab)
    data_kept(lab)
    if command == RESTORE:
        assert kubectl_run(lab, "get", "configmap", "after-snapshot").returncode != 0
        # what etcd held when the first attempt began: written after the snapshot, so not restored data
        db = "/var/lib/etcd.before-restore/member/snap/db"
        assert host_exec(lab, 0, f"grep -c after-snapshot {db}").strip() not in ("", "0")


def test_a_second_run_while_one_works_is_refused_at_once_and_the_first_finishes(lab):
    """Two pipelines on one cluster: the second is refused (exit 7) naming the lock, before it touches
    anything; the first goes on undisturbed. The first is held still (SIGSTOP) while the second runs: a
    snapshot of a small cluster is saved in less time than the second takes to start."""
    value_written(lab)
    second = []

    def start_another(proc: subprocess.Popen[str]) -> None:
        with held_still(proc):
            second.append(up(lab))

    code, stderr = up_until(
        lab,
        "saving snapshot beside from a healthy etcd member",
        start_another,
        command="etcd snapshot-save --name beside",
    )
    assert code == 0, stderr[-3000:]
    refused = second[0]
    assert refused.code == 7, refused.stderr[-3000:]
    assert "another rke-py run is working on" in error_said(refused.stderr), refused.stderr[-3000:]
    assert "beside" in rke_py("etcd", "snapshot-list", *cluster_args(lab)).stdout


# What a host fault strikes in the middle of: how the cluster is readied for the run, the run's words, the
# phase the fault strikes in and how many seconds into it
@dataclass(frozen=True)
class Struck:
    ready: Callable[[Lab], None]
    command: str
    phase: str
    after: float = 2


def flags_changed(lab: Lab) -> None:
    value_written(lab)
    edit_cluster_yml(lab, flags(next(FLAG_VALUES)))


def image_upgraded(lab: Lab) -> None:
    """Every Kubernetes container's image changed, as an upgrade changes it on the hosts: cluster.yml names
    the image the cluster runs under a new tag (the lab holds one build of Kubernetes; its version is kept so
    that the other images KDM names for it stay the ones the lab serves)."""
    value_written(lab)
    running = host_exec(lab, 0, "docker inspect -f '{{.Config.Image}}' kube-apiserver").strip()
    path = running.split("/", 1)[1].rsplit(":", 1)[0]  # without the registry, which cluster.yml adds
    tag = f"upgrade-{next(FLAG_VALUES)}"
    tagged_again(path, running.rsplit(":", 1)[1], tag)
    edit_cluster_yml(lab, lambda d: d.setdefault("system_images", {}).update(kubernetes=f"{path}:{tag}"))


def tagged_again(path: str, tag: str, new: str) -> None:
    """The lab registry serves image `path:tag` as `path:new` too (its manifest copied, as `crane tag`)."""
    port = registry.local_port(registry.find(docker.from_env()))
    url = f"http://127.0.0.1:{port}/v2/{path}/manifests/"
    accept = {"Accept": ", ".join(MANIFEST_TYPES)}
    with urllib.request.urlopen(urllib.request.Request(url + tag, headers=accept)) as got:
        manifest, kind = got.read(), got.headers["Content-Type"]
    put = urllib.request.Request(url + new, data=manifest, method="PUT", headers={"Content-Type": kind})
    with urllib.request.urlopen(put) as done:
        assert done.status == 201, done.status


def snapshot_taken(lab: Lab) -> None:
    """A snapshot to restore, and a value written after it, which the restore takes away."""
    value_written(lab)
    if "before-cut" not in rke_py("etcd", "snapshot-list", *cluster_args(lab)).stdout:
        assert rke_py("etcd", "snapshot-save", "--name", "before-cut", *cluster_args(lab)).code == 0
    kubectl(lab, "create", "configmap", "after-snapshot", "--from-literal=gone=soon")


def key_rotatable(lab: Lab) -> None:
    value_written(lab)
    encrypted(lab)


MANIFEST_TYPES = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
)
FLAG_VALUES = count(100)
STRUCK = {
    "rolling-change": Struck(flags_changed, "up", CONTROL),
    "restore": Struck(snapshot_taken, RESTORE, "restoring every etcd member from the snapshot", 0),
    "fresh-up": Struck(remove, "up", CONTROL),
    "upgrade": Struck(image_upgraded, "up", CONTROL),
    "cert-rotate": Struck(value_written, "cert rotate", CONTROL),
    "rotate-key": Struck(key_rotatable, "encrypt rotate-key", CONTROL),
}
FAULTS = {
    "docker-stopped": docker_stopped,
    "host-restarted": host_restarted,
    "ssh-cut": ssh_cut,
    "network-cut": network_cut,
}
HOST_FAULT_RUNS = (
    [(run, fault) for run in STRUCK for fault in FAULTS]
    if FULL
    else [("rolling-change", "host-restarted"), ("restore", "host-restarted")]
)


@pytest.mark.parametrize(("run", "fault"), HOST_FAULT_RUNS, ids=[f"{r}-{f}" for r, f in HOST_FAULT_RUNS])
def test_a_host_failing_in_the_middle_of_a_run_is_named_and_the_run_again_finishes(lab, run, fault):
    """Host 2 of 3 loses Docker, power, its SSH sessions or its network in the middle of a rolling change, a
    restore, a fresh `up`, an upgrade or a rotation. The run ends within the README's bound, without a
    traceback, naming the host (or finishes, where the connection is dialled again); once the host is back
    the command run again and a plain `up` converge, etcd's data and the running pods kept. A half-restored
    etcd is not started by `up`: the restore run again gives every member the snapshot's data."""
    index, struck = 1, STRUCK[run]
    struck.ready(lab)
    undo: list[Callable[[], None]] = []
    ended: list[float] = []

    def strike(proc: subprocess.Popen[str]) -> None:
        time.sleep(struck.after)
        undo.append(FAULTS[fault](lab, index))
        started = time.monotonic()
        while proc.poll() is None and time.monotonic() - started < RUN_BOUND_S:
            time.sleep(0.5)
        ended.append(time.monotonic() - started)

    try:
        code, stderr = up_until(lab, struck.phase, strike, command=struck.command)
    finally:
        for back in undo:
            back()
    said = stderr.strip().splitlines()[-1]
    print(f"\n{run}, {fault}: exit {code} {ended[0]:.0f} s after the fault; {said}")
    assert "Traceback" not in stderr, stderr[-3000:]
    assert ended[0] < RUN_BOUND_S, f"still running {RUN_BOUND_S} s after the fault"
    if code != 0:
        named = lab.hosts[index].address
        assert named in error_said(stderr) or named in said, stderr[-3000:]  # the error, or a failed check
        if fault == "docker-stopped":  # the cause, not only the components it took along: in our words,
            # or Docker's own while it was still going down
            causes = ("has it stopped?", "Docker is not running", "Server Error")
            assert any(cause in stderr for cause in causes), stderr[-3000:]
        if struck.command == RESTORE:
            assert up(lab).code == 2  # a half-restored etcd is not started
        if struck.command != "up":
            again = rke_py(*struck.command.split(), *cluster_args(lab))
            assert again.code == 0, again.stderr[-3000:]
    converged(lab)
    if struck.ready is not remove:
        data_kept(lab, struck=index)
    if struck.command == RESTORE:
        assert kubectl_run(lab, "get", "configmap", "after-snapshot").returncode != 0
