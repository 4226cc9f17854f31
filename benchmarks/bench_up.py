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


def rke_py(*args: str) -> Timed:
    """Run the CLI as a user would and time it."""
    started = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "rke_py", *args], capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"rke-py {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(seconds, cpu, round(after.ru_maxrss / 1024), done.stdout)


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
