"""How short a fresh `rke-py up` is on lab hosts: 3 nodes with every role, and 5 (3 etcd+controlplane, 2
workers behind nginx-proxy), each first on hosts that have none of the cluster's images (pulled from the lab
registry) and then again after `remove` with the images cached. Prints the wall time, rke-py's CPU, the
seconds each phase took (from the run's log) and the share of the machine's CPU its hypervisor took
(steal), the median of --runs; asserts nothing.

Run with the real binaries the goal is stated for: RKE_PY_KUBE_BINARIES=DIR python
benchmarks/bench_fresh_up.py [--nodes 3,5] [--runs 3] [--output json]. Without them the lab's stand-ins run.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
from datetime import datetime
from pathlib import Path

from bench_up import rke_py
from ruamel.yaml import YAML

PHASE = re.compile(r"^(\S+ \S+) INFO rke_py phase: (.*)$")
# the phases a fresh `up` spends its time in, as its log names them (the rest take milliseconds). Hosts
# prepare (write files, pull images) beside the phases and the etcd plane waits for them: pulls count there.
PHASES = {
    "etcd plane": "etcd",
    "control plane": "control",
    "worker plane": "worker",
    "verifying the cluster": "verify",
}


def roles(cluster_yml: Path, nodes: int) -> None:
    """3 etcd+controlplane nodes (every role when there are 3), workers after them."""
    yaml = YAML()
    data = yaml.load(cluster_yml.read_text())
    for index, node in enumerate(data["nodes"]):
        node["role"] = ["etcd", "controlplane"] if index < 3 else ["worker"]
        if nodes == 3:
            node["role"].append("worker")
    with cluster_yml.open("w") as file:
        yaml.dump(data, file)


def phase_seconds(log: Path, wall: float) -> dict[str, float]:
    """Seconds from each phase's start to the next one's (the last one's to the run's end)."""
    starts = []
    for line in log.read_text().splitlines():
        if m := PHASE.match(line):
            starts.append((datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp(), m[2]))
    spans: dict[str, float] = {}
    end = starts[0][0] + wall if starts else 0.0
    for (at, title), (following, _) in zip(starts, [*starts[1:], (end, "")], strict=True):
        for prefix, key in PHASES.items():
            if title.startswith(prefix):
                spans[key] = spans.get(key, 0.0) + following - at
    return spans


def fresh_ups(nodes: int, run: int) -> list[dict[str, float | str]]:
    name = f"fresh{nodes}"
    lab = json.loads(rke_py("lab", "up", "--nodes", str(nodes), "--name", name, "--output", "json").stdout)
    cluster_yml = Path(lab["cluster_yml"])
    roles(cluster_yml, nodes)
    config = (
        "--config",
        str(cluster_yml),
        "--known-hosts",
        lab["known_hosts"],
        "--host-key-policy",
        "strict",
    )
    rows = []
    try:
        with tempfile.TemporaryDirectory() as logs:
            for images in ("pulled", "cached"):
                log = Path(logs) / f"{images}.log"
                timed = rke_py("up", *config, "--log-file", str(log))
                row: dict[str, float | str] = {"nodes": nodes, "images": images, "run": run}
                row.update(wall_s=timed.seconds, cpu_s=timed.cpu, steal_pct=timed.steal_pct)
                row.update(phase_seconds(log, timed.seconds))
                rows.append(row)
                rke_py("remove", "--force", *config)
    finally:
        rke_py("lab", "down", "--name", name)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="3,5")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", choices=("table", "json"), default="table")
    options = parser.parse_args()
    rke_py("lab", "images")  # built once, outside the timings
    rows = [
        row for n in options.nodes.split(",") for run in range(options.runs) for row in fresh_ups(int(n), run)
    ]
    columns = ["wall_s", "cpu_s", *PHASES.values(), "steal_pct"]
    medians = []
    for key in dict.fromkeys((r["nodes"], r["images"]) for r in rows):
        alike = [r for r in rows if (r["nodes"], r["images"]) == key]
        medians.append(
            {"nodes": key[0], "images": key[1]}
            | {c: round(statistics.median(float(r.get(c, 0.0)) for r in alike), 1) for c in columns}
        )
    if options.output == "json":
        print(json.dumps({"runs": rows, "medians": medians}, indent=2))
        return
    print(f"{'nodes':>5} {'images':>7} " + " ".join(f"{c:>8}" for c in columns))
    for m in medians:
        print(f"{m['nodes']:>5} {m['images']:>7} " + " ".join(f"{m[c]:>8.1f}" for c in columns))


if __name__ == "__main__":
    main()
