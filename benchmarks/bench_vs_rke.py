"""rke-py against RKE, side by side: twin labs (same host count, same Rancher images, same cluster.yml, real
Kubernetes binaries), one driven by `rke`, one by `rke-py`, one after the other in one run. For each
operation: wall seconds, the tool's own CPU seconds, SSH connections it opened (the hosts' sshd logs) and
containers it replaced (IDs before and after); each operation run --repeat times, the median reported.
The fresh `up` runs --repeat times on hosts without the images (they are removed after `remove`), then
--repeat times with them cached. The lab's hosts share this machine's cores, so one host's pull slows every
other's; --host-cpus caps each at that many CPUs, as hosts of their own would be, the same on both twins.

Prints a table (or JSON with --output json), each measurement on stderr as it is taken; asserts nothing.
Needs RKE_PY_RKE (a Go workspace with bin/rke), RKE_PY_KUBE_BINARIES and RKE_PY_RANCHER_IMAGES, as the
tests marked rke do, and RKE_PY_ADDON_BINARIES for CoreDNS (docs/real-parts.md).
Run: python benchmarks/bench_vs_rke.py [--nodes 3,5] [--every-operation-on 3] [--repeat 2] [--host-cpus 0.35]
[--output json]
(sizes not in --every-operation-on, by default all but the smallest, time the fresh `up` only)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import cast

import docker
from ruamel.yaml import YAML

TOOLS = ("rke", "rke-py")
NEEDED = ("RKE_PY_RKE", "RKE_PY_KUBE_BINARIES", "RKE_PY_RANCHER_IMAGES")


@dataclass
class Row:
    tool: str
    nodes: int
    operation: str
    wall_s: float
    cpu_s: float
    ssh_sessions: int
    containers_replaced: int
    host_cpus: float | None  # each host's CPU cap; None: the hosts share the machine's cores


@dataclass
class Twin:
    """One tool's lab: its hosts (the last one spare, for the worker added and removed again)."""

    tool: str
    name: str
    cluster_yml: Path
    hosts: list[str]  # container names on the outer engine
    known_hosts: str
    nodes: list  # cluster.yml's entry for every host, as the lab wrote it
    host_cpus: float | None


def command(tool: str, *args: str) -> list[str]:
    if tool == "rke":
        return [str(Path(os.environ["RKE_PY_RKE"]) / "bin" / "rke"), *args]
    return [sys.executable, "-m", "rke_py", *args]


def run(tool: str, *args: str) -> tuple[float, float]:
    """Run the tool as a pipeline would; (wall seconds, its CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(command(tool, *args), capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(
            f"{tool} {' '.join(args)} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}"
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def on_host(host: str, script: str) -> str:
    output = docker.from_env().containers.get(host).exec_run(["sh", "-c", script]).output
    return cast(bytes, output).decode()


def ssh_logins(twin: Twin) -> int:
    return sum(int(on_host(h, "grep -c '^Accepted ' /var/log/sshd.log || true") or 0) for h in twin.hosts)


def container_ids(twin: Twin) -> dict[tuple[str, str], str]:
    """(host, name) -> ID of every container but the kubelet's pods."""
    out = {}
    for host in twin.hosts:
        for line in on_host(host, "docker ps -a --format '{{.Names}} {{.ID}}'").splitlines():
            name, _, cid = line.partition(" ")
            if name and not name.startswith("k8s_"):
                out[(host, name)] = cid
    return out


def layout(twin: Twin, nodes: int, spare: bool) -> None:
    """cluster.yml's nodes: 3 etcd+controlplane (all roles when 3 nodes), workers after; the spare host
    listed as a worker only when `spare`."""
    yaml = YAML()
    data = yaml.load(twin.cluster_yml.read_text())
    listed = twin.nodes[: nodes + 1]
    for index, node in enumerate(listed):
        node["role"] = (
            (["etcd", "controlplane"] + (["worker"] if nodes == 3 else [])) if index < 3 else ["worker"]
        )
    data["nodes"] = listed if spare else listed[:nodes]
    with twin.cluster_yml.open("w") as file:
        yaml.dump(data, file)


def kubelet_verbosity(twin: Twin, level: int) -> None:
    yaml = YAML()
    data = yaml.load(twin.cluster_yml.read_text())
    data.setdefault("services", {}).setdefault("kubelet", {})["extra_args"] = {"v": str(level)}
    with twin.cluster_yml.open("w") as file:
        yaml.dump(data, file)


def measured(twin: Twin, nodes: int, operation: str, *args: str) -> Row:
    logins, ids = ssh_logins(twin), container_ids(twin)
    wall, cpu = run(twin.tool, *args)
    after = container_ids(twin)
    replaced = sorted(
        f"{host}/{name}" for (host, name), cid in ids.items() if after.get((host, name), cid) != cid
    )
    row = Row(
        twin.tool, nodes, operation, wall, cpu, ssh_logins(twin) - logins, len(replaced), twin.host_cpus
    )
    print(json.dumps({**asdict(row), "replaced": replaced}), file=sys.stderr, flush=True)
    return row


def operations(twin: Twin, nodes: int, repeat: int, every: bool) -> list[Row]:
    """Fresh `up`, and with `every` the day-2 operations after it."""
    config: tuple[str, ...] = ("--config", str(twin.cluster_yml))
    if twin.tool == "rke-py":  # as the lab's users run it: the hosts' keys checked
        config += ("--known-hosts", twin.known_hosts, "--host-key-policy", "strict")
    up = ("up", *config)
    remove = ("remove", "--force", *config)
    restore: tuple[str, ...] = ("etcd", "snapshot-restore", "--name", "bench", *config)
    if twin.tool == "rke-py":  # RKE asks nothing; rke-py asks on a terminal, and refuses without one
        restore += ("--force",)
    rows = []
    for i in range(repeat):
        if i:
            run(twin.tool, *remove)
            for host in twin.hosts:  # what remove leaves, and every image: the hosts as new again
                on_host(host, "docker rm -f $(docker ps -aq); docker rmi -f $(docker images -aq)")
        rows.append(measured(twin, nodes, "fresh up, images pulled", *up))
    for _ in range(repeat):
        run(twin.tool, *remove)
        rows.append(measured(twin, nodes, "fresh up, images cached", *up))
    if not every:
        return rows
    rows += [measured(twin, nodes, "no-op up", *up) for _ in range(repeat)]
    for _ in range(repeat):
        layout(twin, nodes, spare=True)
        rows.append(measured(twin, nodes, "add one worker", *up))
        _back(twin, nodes, up)
    for i in range(repeat):
        kubelet_verbosity(twin, 3 + i)
        rows.append(measured(twin, nodes, "kubelet flag change", *up))
    save = ("etcd", "snapshot-save", "--name", "bench", *config)
    rows += [measured(twin, nodes, "etcd snapshot-save", *save) for _ in range(repeat)]
    rows += [measured(twin, nodes, "etcd snapshot-restore", *restore) for _ in range(repeat)]
    return rows


def _back(twin: Twin, nodes: int, up: tuple[str, ...]) -> None:
    """The spare worker taken out again (not timed), so the next repeat adds it anew."""
    layout(twin, nodes, spare=False)
    run(twin.tool, *up)
    on_host(
        twin.hosts[-1], "docker rm -f $(docker ps -aq) >/dev/null 2>&1; rm -rf /etc/kubernetes /var/lib/etcd"
    )


def twin_lab(tool: str, nodes: int, host_cpus: float | None) -> Twin:
    name = f"vs-{tool.replace('-', '')}{nodes}"
    made = subprocess.run(
        command("rke-py", "lab", "up", "--nodes", str(nodes + 1), "--name", name, "--output", "json"),
        capture_output=True,
        text=True,
        check=True,
    )
    lab = json.loads(made.stdout)
    cluster_yml = Path(lab["cluster_yml"])
    listed = YAML().load(cluster_yml.read_text())["nodes"]
    hosts = [h["name"] for h in lab["hosts"]]
    if host_cpus:
        engine = docker.from_env()
        for host in hosts:
            engine.containers.get(host).update(cpu_period=100_000, cpu_quota=int(host_cpus * 100_000))
    twin = Twin(tool, name, cluster_yml, hosts, lab["known_hosts"], listed, host_cpus)
    layout(twin, nodes, spare=False)
    return twin


def median_rows(rows: list[Row]) -> list[Row]:
    keyed: dict[tuple[str, int, str], list[Row]] = {}
    for row in rows:
        keyed.setdefault((row.tool, row.nodes, row.operation), []).append(row)
    return [
        Row(
            tool,
            nodes,
            operation,
            statistics.median(r.wall_s for r in runs),
            statistics.median(r.cpu_s for r in runs),
            round(statistics.median(r.ssh_sessions for r in runs)),
            round(statistics.median(r.containers_replaced for r in runs)),
            runs[0].host_cpus,
        )
        for (tool, nodes, operation), runs in keyed.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="3")
    parser.add_argument("--every-operation-on", default="", help="sizes that run more than a fresh up")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--host-cpus", type=float, help="cap each lab host at this many CPUs")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    options = parser.parse_args()
    if absent := [name for name in NEEDED if not os.environ.get(name)]:
        sys.exit(f"set {', '.join(absent)}: both tools run on real binaries and Rancher's images")
    sizes = [int(n) for n in options.nodes.split(",")]
    every = {int(n) for n in options.every_operation_on.split(",") if n} or {min(sizes)}
    rows: list[Row] = []
    for nodes in sizes:
        for tool in TOOLS:
            twin = twin_lab(tool, nodes, options.host_cpus)
            try:
                rows += operations(twin, nodes, options.repeat, nodes in every)
            finally:
                run("rke-py", "lab", "down", "--name", twin.name)
    table = median_rows(rows)
    if options.output == "json":
        print(json.dumps([asdict(r) for r in table], indent=2))
        return
    if options.host_cpus:
        print(f"each host capped at {options.host_cpus} CPUs")
    heads = ("wall_s", "cpu_s", "ssh", "replaced", "vs RKE")
    print(f"{'tool':7} {'nodes':>5} {'operation':22} " + " ".join(f"{h:>8}" for h in heads))
    rke = {(r.nodes, r.operation): r.wall_s for r in table if r.tool == "rke"}
    for r in sorted(table, key=lambda r: (r.nodes, r.operation, r.tool)):
        ratio = f"{r.wall_s / rke[(r.nodes, r.operation)]:.2f}" if r.tool == "rke-py" else ""
        print(
            f"{r.tool:7} {r.nodes:>5} {r.operation:22} {r.wall_s:>8.1f} {r.cpu_s:>8.1f} "
            f"{r.ssh_sessions:>8} {r.containers_replaced:>8} {ratio:>8}"
        )


if __name__ == "__main__":
    main()
