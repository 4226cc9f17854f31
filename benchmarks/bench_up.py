"""How long `rke-py up` takes on lab clusters of 3, 6 and 12 nodes, what a no-op re-run costs (verify
included, as a user runs it), and how much CPU rke-py itself spends (user+sys of the rke-py process, apart
from the lab's hosts): beside `bench_scale.py --controlplanes 3 --no-addons`, the lab's layout, it shows
what the real transport (SSH, TLS, docker-py) adds to the simulated hosts' figures.

Prints a table; asserts nothing (speed goals are read from the table, not enforced by tests).
Run: python benchmarks/bench_up.py [--sizes 3,6,12]
Needs the lab (scripts/bootstrap); images are built once and cached before timing starts. `python -m
rke_py` runs from the current directory, so running this from another checkout measures that checkout.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Timed:
    seconds: float
    cpu: float  # user+sys seconds of the rke-py process
    peak_mib: int  # the largest resident size of any rke-py process so far
    stdout: str
    steal_pct: float  # the share of the machine's CPU time its hypervisor took while the command ran


def cpu_ticks() -> tuple[int, int]:
    """The machine's CPU time so far, all and stolen (/proc/stat's `cpu` line, in ticks). The 2-core VM
    the benchmarks ran on lost 40% of its CPU to its hypervisor while a 24-host lab was busy, and 1% at
    rest: a run's figures are read with it."""
    with open("/proc/stat") as stat:
        fields = [int(f) for f in stat.readline().split()[1:9]]  # user … steal; guest is counted in user
    return sum(fields), fields[7]


def steal_pct(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[0] - before[0]
    return round(100 * (after[1] - before[1]) / total, 1) if total else 0.0


def rke_py(*args: str) -> Timed:
    """Run the CLI as a user would and time it."""
    started = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    ticks = cpu_ticks()
    done = subprocess.run([sys.executable, "-m", "rke_py", *args], capture_output=True, text=True)
    seconds = time.monotonic() - started
    stolen = steal_pct(ticks, cpu_ticks())
    if done.returncode != 0:
        sys.exit(f"rke-py {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(seconds, cpu, round(after.ru_maxrss / 1024), done.stdout, stolen)


def bench(nodes: int) -> dict[str, float]:
    name = f"bench{nodes}"
    lab = rke_py("lab", "up", "--nodes", str(nodes), "--name", name, "--output", "json")
    cluster_yml = str(Path(json.loads(lab.stdout)["cluster_yml"]))
    try:
        up = rke_py("up", "--config", cluster_yml)
        noop = rke_py("up", "--config", cluster_yml)
        plan = rke_py("plan", "--config", cluster_yml)
        status = rke_py("status", "--config", cluster_yml)
    finally:
        rke_py("lab", "down", "--name", name)
    return {
        "nodes": nodes,
        "lab up": lab.seconds,
        "up": up.seconds,
        "up CPU": up.cpu,
        "no-op up": noop.seconds,
        "no-op CPU": noop.cpu,
        "plan": plan.seconds,
        "plan CPU": plan.cpu,
        "status": status.seconds,
        "peak MiB": up.peak_mib,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3,6,12")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    rke_py("lab", "images")  # build and cache images outside the timings
    rows = [bench(n) for n in sizes]
    columns = list(rows[0])
    print(" | ".join(f"{c:>9}" for c in columns))
    for row in rows:
        print(" | ".join(f"{row[c]:>9.1f}" if isinstance(row[c], float) else f"{row[c]:>9}" for c in columns))
    if len(rows) > 1:
        small, large = rows[0], rows[-1]
        ratio = large["up"] / small["up"]
        print(f"up on {large['nodes']} nodes / up on {small['nodes']} nodes: {ratio:.2f}x")


if __name__ == "__main__":
    main()
