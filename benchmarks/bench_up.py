"""How long `rke-py up` takes on lab clusters of 3 and 6 nodes, and what a no-op re-run costs.

Prints a table; asserts nothing (speed goals are read from the table, not enforced by tests).
Run: python benchmarks/bench_up.py [--sizes 3,6]
Needs the lab (scripts/bootstrap); images are built once and cached before timing starts.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def rke_py(*args: str) -> tuple[float, int, str]:
    """Run the CLI; return (seconds, peak RSS of the child in MiB, stdout)."""
    started = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run([sys.executable, "-m", "rke_py", *args], capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"rke-py {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return seconds, round(peak), done.stdout


def bench(nodes: int) -> dict[str, float]:
    name = f"bench{nodes}"
    lab_seconds, _, out = rke_py("lab", "up", "--nodes", str(nodes), "--name", name, "--output", "json")
    cluster_yml = Path(json.loads(out)["cluster_yml"])
    try:
        up, peak_up, _ = rke_py("up", "--config", str(cluster_yml))
        noop, _, _ = rke_py("up", "--config", str(cluster_yml), "--no-verify")
        plan, _, _ = rke_py("plan", "--config", str(cluster_yml))
        status, _, _ = rke_py("status", "--config", str(cluster_yml))
    finally:
        rke_py("lab", "down", "--name", name)
    return {
        "nodes": nodes,
        "lab up": lab_seconds,
        "up": up,
        "no-op up": noop,
        "plan": plan,
        "status": status,
        "peak MiB": peak_up,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3,6")
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
