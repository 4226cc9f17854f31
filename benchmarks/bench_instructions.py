"""How much work each operation of `bench_scale.py` does, counted in machine instructions rather than timed.

CPU seconds on a shared machine move by up to 40% between identical runs, and a process three times the
size pays more for each instruction (more of its memory is out of the caches), so a CPU ratio cannot say
whether the work itself grows faster than the hosts. Instructions can: valgrind's callgrind counts them
the same on any machine, loaded or not. Each size runs in a child under callgrind, the same simulated
hosts and operations as `bench_scale.py` at latency 0; `time.tzset()` before and after each operation
has callgrind write its counts there (`--dump-before=time_tzset`), so every operation gets its own.
The counts include the simulated hosts' answers (`bench_scale.py` subtracts their CPU; here they cannot
be told apart), and a fresh `up`'s include its RSA key generation, whose prime search varies from run to
run.

Prints each operation's instructions at every size and the ratio of the largest size to the smallest (with
`--output json`, rows {nodes, operation, instructions, per_host}, per_host being instructions over nodes);
asserts nothing.
Run: python benchmarks/bench_instructions.py --nodes 1000 3000 [--output json]
Needs valgrind (`apt-get install valgrind`); callgrind slows Python some 50 times, so 1,000 and 3,000 nodes
took 38 minutes here. The sizes run side by side, one per core.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.unit.fakehost, beside rke_py

from bench_scale import OPERATIONS, measure_size

MARKER = "time_tzset"  # the C function callgrind dumps before; nothing else in a run calls it


def child(nodes: int) -> None:
    """Every operation on `nodes` simulated hosts, each between two markers."""
    from rke_py import cli

    run = cli.main

    def marked(argv: list[str]) -> None:
        time.tzset()
        try:
            run(argv)
        finally:
            time.tzset()

    cli.main = marked  # type: ignore[assignment]
    measure_size(nodes, 0.0, 50, 5, True)


def totals(out: Path) -> list[int]:
    """Each dump's instruction count, in the order callgrind wrote them (`<out>.1`, `<out>.2`, ...)."""
    counts = []
    for index in range(1, 2 * len(OPERATIONS) + 1):
        text = Path(f"{out}.{index}").read_text()
        counts.append(next(int(line.split()[1]) for line in text.splitlines() if line.startswith("totals:")))
    return counts


def count(nodes: int, scratch: Path) -> list[dict[str, object]]:
    """Run one size under callgrind; a row per operation."""
    out = scratch / f"callgrind.{nodes}"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--dump-before={MARKER}",
        f"--callgrind-out-file={out}",
        sys.executable,
        __file__,
        "--child",
        "--nodes",
        str(nodes),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{nodes} nodes: exit {done.returncode}\n{done.stderr[-3000:]}")
    # dump 1 is start-up; then each operation (the even dumps) and what the benchmark does between them
    dumps = totals(out)
    return [
        {
            "nodes": nodes,
            "operation": operation,
            "instructions": dumps[2 * index + 1],
            "per_host": round(dumps[2 * index + 1] / nodes),
        }
        for index, operation in enumerate(OPERATIONS)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 3000])
    parser.add_argument("--output", choices=("text", "json"), default="text")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one size, under callgrind
    args = parser.parse_args()
    if args.child:
        child(args.nodes[0])
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed: apt-get install valgrind")
    sizes = sorted(args.nodes)
    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        rows = [row for found in pool.map(lambda n: count(n, Path(scratch)), sizes) for row in found]
    if args.output == "json":
        print(json.dumps(rows))
        return
    at = {(r["nodes"], r["operation"]): int(r["instructions"]) for r in rows}  # type: ignore[call-overload]
    small, large = sizes[0], sizes[-1]
    ratio = f"{large:,} / {small:,}" if len(sizes) > 1 else ""
    print(f"{'operation':>15} | " + " | ".join(f"{n:>10,} nodes" for n in sizes) + f" | {ratio:>13}")
    for operation in OPERATIONS:
        counts = " | ".join(f"{at[n, operation] / 1e9:>10.2f} G    " for n in sizes)
        grown = f"{at[large, operation] / at[small, operation]:>12.2f}x" if ratio else ""
        print(f"{operation:>15} | {counts} | {grown}")


if __name__ == "__main__":
    main()
