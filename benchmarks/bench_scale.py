"""rke-py's own cost at 100 to 3,000 nodes, on simulated hosts (`benchmarks/simulated.py`).

Each size runs in a fresh process, as the CLI would (with `--runs`, the sizes take turns), through the
real commands (`rke_py.cli.main`) with only the SSH connector swapped for simulated hosts that answer with
a round trip's latency. Operations, in order: fresh `up`, no-op `up`, `plan`, `status`, a one-flag
kubelet change, adding 10 workers, removing them. Layout: 5 etcd+controlplane nodes, the rest workers,
RKE's default add-ons (`--controlplanes N` and `--no-addons` give the lab's layout, to compare with
`bench_up.py`).

Prints a table and the goals beside what was measured; asserts nothing (goals are read, not enforced).
Run: python benchmarks/bench_scale.py --nodes 100 1000 [--latency-ms 30] [--concurrency 50] [--runs 3]
[--output json]. cpu_s is the process's CPU less what the simulation itself spent answering; floor_s the
least wall time the run's round trips allow at that concurrency (its critical path, `simulated.
CriticalPath`), x_floor wall_s as a multiple of it; peak_rss_mib is the process's peak resident size
during the operation (simulated hosts included: they keep digests, not files).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.unit.fakehost, beside rke_py

OPERATIONS = ("up", "noop-up", "plan", "status", "kubelet-change", "add-10", "remove-10")
COLUMNS = (
    "nodes",
    "operation",
    "wall_s",
    "floor_s",
    "x_floor",
    "cpu_s",
    "peak_rss_mib",
    "ssh_sessions",
    "ssh_commands",
    "docker_calls",
    "api_requests",
    "peak_hosts",
)


def cluster_yml(
    nodes: int, controlplanes: int, addons: bool, kubelet_args: dict[str, str] | None = None
) -> str:
    """`controlplanes` etcd+controlplane nodes, the rest workers; RKE's default add-ons, or none (as the lab
    has them)."""
    lines = ["nodes:"]
    for n in range(nodes):
        roles = "[etcd, controlplane]" if n < controlplanes else "[worker]"
        lines.append(f"  - {{address: 10.{1 + n // 250}.0.{1 + n % 250}, user: root, role: {roles}}}")
    if not addons:
        lines += ["network: {plugin: none}", "dns: {provider: none}", "ingress: {provider: none}"]
        lines.append("monitoring: {provider: none}")
    if kubelet_args:
        lines.append(f"services: {{kubelet: {{extra_args: {json.dumps(kubelet_args)}}}}}")
    return "\n".join(lines) + "\n"


def peak_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def peak_mib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return 0


def measure_size(
    nodes: int, latency: float, concurrency: int, controlplanes: int, addons: bool
) -> list[dict[str, object]]:
    """Every operation on one simulated cluster of `nodes` nodes, in this process."""
    from benchmarks import simulated
    from rke_py import cli
    from rke_py.config import load
    from rke_py.deploy import session

    meter = simulated.Meter(latency)
    meter.path.install()
    world = simulated.sim_world()
    session.SSHConnector = simulated.connector_factory(world, meter)  # type: ignore[assignment,misc]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.yml"
        plain = cluster_yml(nodes, controlplanes, addons)
        changed = cluster_yml(nodes, controlplanes, addons, {"v": "3"})
        steps = {
            "up": (["up"], plain),
            "noop-up": (["up"], plain),
            "plan": (["plan"], plain),
            "status": (["status"], plain),
            "kubelet-change": (["up"], changed),
            "add-10": (["up"], cluster_yml(nodes + 10, controlplanes, addons, {"v": "3"})),
            "remove-10": (["up"], changed),
        }
        for operation, (command, text) in steps.items():
            path.write_text(text)
            if operation in ("up", "add-10"):
                known = set(world.hosts)
                simulated.add_hosts(world, [n for n in load(path).config.nodes if n.address not in known])
            gc.collect()
            gc.freeze()  # the simulated hosts are not rke-py's: its collections need not walk them
            meter.reset()
            peak_reset()
            cpu, started = time.process_time(), time.monotonic()
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                try:
                    cli.main([*command, "--config", str(path), "--concurrency", str(concurrency)])
                except SystemExit as exit:
                    code = exit.code
            wall = time.monotonic() - started
            if code != 0:
                sys.exit(f"{nodes} nodes, {operation}: exit {code}\n{out.getvalue()[-3000:]}")
            floor = meter.path.now()
            rows.append(
                {
                    "nodes": nodes,
                    "operation": operation,
                    "wall_s": round(wall, 2),
                    "floor_s": round(floor, 2),
                    "x_floor": round(wall / floor, 1) if floor else None,
                    "cpu_s": round(time.process_time() - cpu - meter.sim_cpu, 2),
                    "peak_rss_mib": peak_mib(),
                    "ssh_sessions": meter.counts["ssh_sessions"],
                    "ssh_commands": meter.counts["ssh_commands"],
                    "docker_calls": meter.counts["docker_calls"],
                    "api_requests": meter.counts["api_requests"],
                    "peak_hosts": meter.peak_hosts,
                }
            )
    return rows


def goals(rows: list[dict[str, object]], concurrency: int) -> list[tuple[str, str, bool]]:
    """(goal, what was measured, met) for the goals that the measured sizes allow."""
    at = {(r["nodes"], r["operation"]): r for r in rows}
    out = []
    if (1000, "noop-up") in at:
        worst = max((float(at[1000, op]["x_floor"] or 0), op) for op in OPERATIONS)
        out.append(
            ("every operation at 1,000 nodes <= 4x its floor", f"{worst[0]}x ({worst[1]})", worst[0] <= 4)
        )
        for op in ("noop-up", "plan"):
            cpu = float(at[1000, op]["cpu_s"])
            out.append((f"{op} at 1,000 nodes <= 1.5 s of rke-py CPU", f"{cpu} s", cpu <= 1.5))
    peak = max(int(r["peak_rss_mib"]) for r in rows)
    out.append(("peak memory <= 500 MiB", f"{peak} MiB", peak <= 500))
    if (3000, "up") in at and (1000, "up") in at:
        for metric in ("wall_s", "cpu_s", "peak_rss_mib"):
            worst = max(
                (float(at[3000, op][metric]) / max(float(at[1000, op][metric]), 0.01), op)
                for op in OPERATIONS
            )
            out.append(
                (f"3,000 / 1,000 nodes {metric} <= 3.1x", f"{worst[0]:.2f}x ({worst[1]})", worst[0] <= 3.1)
            )
    noop_api = [int(r["api_requests"]) for r in rows if r["operation"] == "noop-up"]  # smallest size first
    grows = " / ".join(map(str, noop_api))
    out.append(("no-op up's API requests do not grow with nodes", grows, max(noop_api) <= noop_api[0]))
    hosts = max(int(r["peak_hosts"]) for r in rows)
    out.append((f"hosts at once <= --concurrency {concurrency}", str(hosts), hosts <= concurrency))
    return out


def median_rows(runs: list[list[dict[str, object]]]) -> list[dict[str, object]]:
    """Each row's times and sizes as the median of the runs (the counts are the same in every run)."""
    rows = []
    for same in zip(*runs, strict=True):
        row = dict(same[0])
        for column in ("wall_s", "floor_s", "cpu_s", "peak_rss_mib"):
            row[column] = round(statistics.median(float(r[column]) for r in same), 2)  # type: ignore[arg-type]
        row["x_floor"] = round(row["wall_s"] / row["floor_s"], 1) if row["floor_s"] else None  # type: ignore[operator]
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 300, 1000, 3000])
    parser.add_argument("--latency-ms", type=float, default=30, help="one network round trip")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument(
        "--controlplanes", type=int, default=5, help="etcd+controlplane nodes; the rest workers"
    )
    parser.add_argument("--no-addons", action="store_true", help="add-ons off, as in the lab")
    parser.add_argument("--runs", type=int, default=1, help="runs of each size; the table shows medians")
    parser.add_argument("--output", choices=("text", "json"), default="text")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: one size
    args = parser.parse_args()
    if args.one:
        sizes = (
            args.nodes[0],
            args.latency_ms / 1000,
            args.concurrency,
            args.controlplanes,
            not args.no_addons,
        )
        print(json.dumps(measure_size(*sizes)))
        return
    common = ["--latency-ms", str(args.latency_ms), "--concurrency", str(args.concurrency)]
    common += ["--controlplanes", str(args.controlplanes)] + (["--no-addons"] if args.no_addons else [])
    order = sorted(args.nodes)
    runs: dict[int, list[list[dict[str, object]]]] = {nodes: [] for nodes in order}
    for run in range(args.runs):  # each size in turn, so the machine's drift falls on every size alike
        for nodes in order:
            done = subprocess.run(
                [sys.executable, __file__, "--one", "--nodes", str(nodes), *common],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                sys.exit(done.stderr or done.stdout)
            runs[nodes].append(json.loads(done.stdout))
            if args.output == "text":
                print(f"run {run + 1}: {nodes} nodes done", file=sys.stderr)
    rows = [row for nodes in order for row in median_rows(runs[nodes])]
    if args.output == "json":
        print(json.dumps(rows))
        return
    layout = f"{args.controlplanes} etcd+controlplane, {'no' if args.no_addons else 'default'} add-ons"
    print(
        f"{layout}; latency {args.latency_ms:g} ms a round trip; --concurrency {args.concurrency}; "
        f"median of {args.runs} run(s); floor_s: the least wall time the round trips allow"
    )
    print(" | ".join(f"{c:>14}" for c in COLUMNS))
    for row in rows:
        print(" | ".join(f"{row[c]!s:>14}" for c in COLUMNS))
    print()
    for goal, measured, met in goals(rows, args.concurrency):
        print(f"{'met    ' if met else 'NOT MET'}  {goal}: {measured}")


if __name__ == "__main__":
    main()
