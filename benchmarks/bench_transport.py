"""rke-py's CPU per host on real transports: the lab's hosts (real sshd and dockerd, the stand-ins) at two
sizes, the same layout as `bench_scale.py --controlplanes 3 --no-addons`. The slope between the sizes is
what each further host costs rke-py (SSH login and key exchange, ciphers, TLS, Docker API framing, YAML,
rendering), apart from what any run costs once.

Rows `{hosts, operation, wall_s, cpu_s, cpu_ms_per_host}` for a fresh `up`, a no-op `up`, `plan` and
`status` (cpu_s: user+sys of the rke-py process; cpu_ms_per_host: the slope, on the rows of the larger
size). `--profile` builds one more lab of the smaller size and runs each operation there under yappi (CPU
clock, every thread, C functions included), then prints where the CPU went by kind; yappi slows Python
code more than C, so the shares are read as an order, not as times.
Run: python benchmarks/bench_transport.py [--sizes 24,48] [--output json] [--profile]
Needs the lab (scripts/bootstrap), and yappi for --profile (`pip install -e .[bench]`); asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's rke_py, for --profiled
from bench_up import rke_py

OPERATIONS = {"up": ["up"], "noop-up": ["up"], "plan": ["plan"], "status": ["status"]}
# Where a function's CPU goes, by the first pattern its file (or a C function's module) holds.
KINDS = (
    (
        "starting up (imports, classes, regular expressions)",
        ("importlib", "<frozen", "marshal", "builtins compile", "builtins exec", "__build_class__", "/re/"),
    ),
    ("SSH key exchange", ("paramiko/kex", "paramiko/ecdsakey", "paramiko/ed25519key", "paramiko/rsakey")),
    ("SSH login", ("paramiko/auth", "paramiko/agent", "paramiko/pkey", "paramiko/client")),
    ("SSH packets and ciphers", ("paramiko/", "cryptography", "_cffi", "bcrypt", "nacl")),
    ("TLS", ("ssl",)),
    ("Docker API framing", ("docker/", "urllib3", "requests", "http/", "email/", "socket")),
    ("YAML", ("ruamel", "/yaml/", "_yaml")),
    ("rendering", ("jinja2", "rke_py/templating", "markupsafe")),
    ("planning and certificates", ("rke_py/plan", "rke_py/pki", "rke_py/config")),
    ("JSON", ("json",)),
    ("threads and locks", ("threading", "concurrent/", "queue", "_thread")),
    ("rke-py, the rest", ("rke_py/",)),
)


def kind_of(module: str) -> str:
    for kind, patterns in KINDS:
        if any(p in module for p in patterns):
            return kind
    return "other (Python's own)"


def profiled(args: list[str]) -> None:
    """Run the CLI in this process under yappi; print {kind: CPU seconds} as JSON on the last line."""
    import yappi

    from rke_py import cli

    yappi.set_clock_type("cpu")
    yappi.start(builtins=True)
    code = 0
    try:
        cli.main(args)
    except SystemExit as exit:
        code = int(exit.code or 0)
    yappi.stop()
    spent: Counter[str] = Counter()
    for stat in yappi.get_func_stats():
        spent[kind_of(f"{stat.module} {stat.name}")] += stat.tsub
    print(json.dumps({"exit": code, "kinds": dict(spent)}))


def lab(hosts: int, name: str) -> str:
    made = rke_py("lab", "up", "--nodes", str(hosts), "--name", name, "--output", "json")
    return str(Path(json.loads(made.stdout)["cluster_yml"]))


def measure(hosts: int) -> list[dict[str, object]]:
    name = f"transport{hosts}"
    cluster_yml = lab(hosts, name)
    rows: list[dict[str, object]] = []
    try:
        for operation, command in OPERATIONS.items():
            timed = rke_py(*command, "--config", cluster_yml)
            row = {"hosts": hosts, "operation": operation, "wall_s": round(timed.seconds, 2)}
            rows.append({**row, "cpu_s": round(timed.cpu, 2), "cpu_ms_per_host": None})
    finally:
        rke_py("lab", "down", "--name", name)
    return rows


def profile(hosts: int) -> dict[str, dict[str, float]]:
    """Each operation's CPU by kind, on a lab of its own."""
    name = f"transport{hosts}-profile"
    cluster_yml = lab(hosts, name)
    out = {}
    try:
        for operation, command in OPERATIONS.items():
            child = [sys.executable, __file__, "--profiled", "--", *command, "--config", cluster_yml]
            done = subprocess.run(child, capture_output=True, text=True)
            answer = json.loads(done.stdout.strip().splitlines()[-1])
            if answer["exit"] != 0:
                sys.exit(f"{operation} under the profiler failed:\n{done.stderr[-3000:]}")
            out[operation] = answer["kinds"]
    finally:
        rke_py("lab", "down", "--name", name)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="24,48", help="two lab sizes, hosts")
    parser.add_argument("--output", choices=("text", "json"), default="text")
    parser.add_argument("--profile", action="store_true", help="where the CPU goes, at the smaller size")
    parser.add_argument("--profiled", action="store_true", help=argparse.SUPPRESS)  # a child: one command
    args, rest = parser.parse_known_args()
    if args.profiled:
        profiled(rest[1:] if rest[:1] == ["--"] else rest)
        return
    small, large = sorted(int(s) for s in args.sizes.split(","))
    rke_py("lab", "images")  # build and cache images outside the timings
    rows = measure(small) + measure(large)
    at = {(r["hosts"], r["operation"]): r for r in rows}
    for operation in OPERATIONS:
        slope = (float(at[large, operation]["cpu_s"]) - float(at[small, operation]["cpu_s"])) / (
            large - small
        )
        at[large, operation]["cpu_ms_per_host"] = round(slope * 1000, 1)
    kinds = profile(small) if args.profile else {}
    if args.output == "json":
        print(json.dumps({"rows": rows, "profile": kinds} if args.profile else rows))
        return
    columns = ("hosts", "operation", "wall_s", "cpu_s", "cpu_ms_per_host")
    print(" | ".join(f"{c:>15}" for c in columns))
    for row in rows:
        print(" | ".join(f"{row[c]!s:>15}" for c in columns))
    for operation, spent in kinds.items():
        total = sum(spent.values()) or 1
        top = sorted(spent.items(), key=lambda kv: -kv[1])
        print(f"\n{operation} at {small} hosts, CPU by kind (under yappi):")
        for kind, seconds in top:
            print(f"  {seconds / total:6.1%}  {kind}")


if __name__ == "__main__":
    main()
