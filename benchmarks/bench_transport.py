"""rke-py's CPU per host on real transports: the lab's hosts (real sshd and dockerd, the stand-ins) at two
sizes, the same layout as `bench_scale.py --controlplanes 3 --no-addons`. The slope between the sizes is
what each further host costs rke-py (SSH login and key exchange, ciphers, TLS, Docker API framing, YAML,
rendering), apart from what any run costs once.

Rows `{hosts, operation, wall_s, cpu_s, cpu_ms_per_host, load, cpu_runs, steal_pct}` for a fresh `up`, a
no-op `up`, `plan` and `status` (cpu_s: user+sys of the rke-py process, the median of cpu_runs, every
run's; cpu_ms_per_host: the slope, on the rows of the larger size; load: the 1-minute load average the
operation started at; steal_pct: the median share of the machine's CPU its hypervisor took during a run).
Both labs run at once. Each operation runs `--runs` times (medians; before each fresh `up` but the first,
`remove` and the hosts' images dropped), the two sizes in turn, once the machine settled: the hosts'
components go on starting long after a fresh `up` of many hosts, and on a machine that busy the CPU a run
spends grows with the load, which made slopes between a quiet and a loaded size swing by 20 ms a host.
`--profile` builds one more lab of the smaller size and runs each operation there under yappi (CPU clock,
every thread, C functions included), then prints where the CPU went by kind and the requests each host was
asked (SSH logins, commands, file batches, Docker requests, channels, probes, TLS handshakes, SSH packets);
yappi slows Python code more than C, so the shares are read as an order, not as times. `--operations` times
instead, one host after another on a lab of the smaller size, each kind of request a run makes (CPU per
request, medians of `--repeat` rounds; the SSH packets each one received): the cost model the slopes add up
from.
Run: python benchmarks/bench_transport.py [--sizes 24,48] [--runs 3] [--output json] [--profile |
  --operations]
Needs the lab (scripts/bootstrap), and yappi for --profile (`pip install -e .[bench]`); asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

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
    ("SSH in C (libssh2)", ("ssh2", "rke_py/hosts/libssh2")),
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


# The requests a run makes, counted by the profiler (function calls): with `--operations`' cost of each,
# what a host's share of a run should cost.
# (paramiko counts the SSH packets of the connections it carries; libssh2 counts none.)
REQUESTS = {
    "SSH logins": ("rke_py/hosts/ssh.py", "connect"),
    "commands": ("rke_py/hosts/ssh.py", "Connection._run"),
    "file batches": ("rke_py/hosts/ssh.py", "Connection.write_files"),
    "Docker requests": ("rke_py/hosts/docker_api.py", "NodeAPIClient.request"),
    "Docker channels": ("rke_py/hosts/ssh.py", "Connection.open_unix"),
    "TCP channels (probes, API)": ("rke_py/hosts/ssh.py", "Connection.open_tcp"),
    "health probes": ("rke_py/verify/health.py", "probe"),
    "TLS handshakes": ("rke_py/hosts/channels.py", "_TLSChannel.__init__"),
    "SSH packets received": ("paramiko/packet.py", "Packetizer.read_message"),
    "SSH packets sent": ("paramiko/packet.py", "Packetizer.send_message"),
}


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
    made = dict.fromkeys(REQUESTS, 0)
    for stat in yappi.get_func_stats():
        spent[kind_of(f"{stat.module} {stat.name}")] += stat.tsub
        for request, (module, name) in REQUESTS.items():
            if stat.module.endswith(module) and stat.name == name:
                made[request] += stat.ncall
    print(json.dumps({"exit": code, "kinds": dict(spent), "requests": made}))


def lab(hosts: int, name: str) -> str:
    made = rke_py("lab", "up", "--nodes", str(hosts), "--name", name, "--output", "json")
    return str(Path(json.loads(made.stdout)["cluster_yml"]))


def settle(patience: float = 300, every: float = 15) -> float:
    """Wait until the 1-minute load average stops falling and is at most twice the cores (or `patience`
    runs out) and return it: the hosts' components start long after a fresh `up` of many hosts has ended,
    and the CPU a run spends on a machine that busy says more about the machine than about the run. (The
    load once stopped falling at 80 for a while, with the 48-host lab's components still starting. With
    both labs' 72 hosts up and at rest it stays at 6 to 10 on 2 cores, so there each wait is `patience`:
    about as long as a 48-host lab took to come to rest after its `up`.)"""
    deadline = time.monotonic() + patience
    quiet = 2 * (os.cpu_count() or 1)
    load = os.getloadavg()[0]
    while time.monotonic() < deadline:
        time.sleep(every)
        now = os.getloadavg()[0]
        if now > 0.9 * load and now <= quiet:
            return now
        load = now
    return load


def start_over(name: str, cluster_yml: str) -> None:
    """The cluster removed and every image dropped from lab `name`'s hosts: the next `up` is a new
    cluster's, whose hosts pull their images. (Making new labs instead made Docker remove and create 72
    hosts on one network each time; once it kept counting an endpoint on a removed one's network.)"""
    import docker

    from rke_py.lab.state import LABEL

    rke_py("remove", "--force", "--config", cluster_yml)
    hosts = docker.from_env().containers.list(filters={"label": f"{LABEL}={name}"})
    with ThreadPoolExecutor(max_workers=8) as pool:
        for done in pool.map(
            lambda host: host.exec_run(["docker", "image", "prune", "--all", "--force"]), hosts
        ):
            if done.exit_code != 0:
                sys.exit(f"dropping the images of {name}'s hosts failed: {done.output.decode()[-2000:]}")


def _row(hosts: int, operation: str, timed: list[Any], load: float) -> dict[str, object]:
    return {
        "hosts": hosts,
        "operation": operation,
        "wall_s": round(statistics.median(t.seconds for t in timed), 2),
        "cpu_s": round(statistics.median(t.cpu for t in timed), 2),
        "cpu_ms_per_host": None,
        "load": round(load, 1),
        "cpu_runs": [round(t.cpu, 2) for t in timed],
        "steal_pct": statistics.median(t.steal_pct for t in timed),
    }


def measure(sizes: tuple[int, int], runs: int) -> list[dict[str, object]]:
    """Both labs up at once; every operation `runs` times on the two sizes in turn, each after the machine
    settled (medians). Measured one size after the other, the two sizes met different loads (the larger
    lab's components still starting), and the slope between them moved with the load more than with the
    code: 8 and 26 ms a host in two runs of the same code. In turn, both meet the same load. Before each
    fresh `up` but the first the cluster is removed and the hosts' images dropped, so its hosts pull
    them every time as a new cluster's do; a new cluster's keys alone move its CPU by some 0.3 s from run
    to run. `load`: the 1-minute load average the operation (its first run) started at."""
    labs: dict[int, str] = {}
    rows: list[dict[str, object]] = []
    try:
        fresh: dict[int, list[Any]] = {hosts: [] for hosts in sizes}
        loads: dict[int, float] = {}
        for hosts in sizes:
            labs[hosts] = lab(hosts, f"transport{hosts}")
        for run in range(runs):
            for hosts in sizes:
                if run:
                    start_over(f"transport{hosts}", labs[hosts])
                loads.setdefault(hosts, settle())
                fresh[hosts].append(rke_py("up", "--config", labs[hosts]))
        rows += [_row(hosts, "up", fresh[hosts], loads[hosts]) for hosts in sizes]
        for operation, command in OPERATIONS.items():
            if operation == "up":
                continue
            load = settle()
            timed: dict[int, list[Any]] = {hosts: [] for hosts in sizes}
            for _ in range(runs):
                for hosts in sizes:
                    timed[hosts].append(rke_py(*command, "--config", labs[hosts]))
            rows += [_row(hosts, operation, timed[hosts], load) for hosts in sizes]
    finally:
        for hosts in labs:
            rke_py("lab", "down", "--name", f"transport{hosts}")
    return rows


def profile(hosts: int) -> dict[str, dict[str, dict[str, float]]]:
    """Each operation's CPU by kind, and the requests it made per host, on a lab of its own."""
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
            per_host = {k: round(n / hosts, 1) for k, n in answer["requests"].items()}
            out[operation] = {"kinds": answer["kinds"], "requests_per_host": per_host}
    finally:
        rke_py("lab", "down", "--name", name)
    return out


def _requests(host: Any, pull: str) -> dict[str, Callable[[], object]]:
    """What a run asks a host, one request of each kind (`host`: a connected `rke_py.hosts.host.Host`)."""
    from rke_py.errors import ConnectError
    from rke_py.plan.model import FileSpec

    scratch = FileSpec("/tmp/rke-py-bench/scratch", b"x" * 2000)  # a certificate's size
    eight = [FileSpec(f"/tmp/rke-py-bench/scratch{i}", b"x" * 2000, 0o600) for i in range(8)]

    def refused() -> None:
        with contextlib.suppress(ConnectError):  # the refusal is the point
            host.conn.open_tcp("127.0.0.1", 1)

    def pulled() -> None:
        host.docker.pull(pull, None)
        host.docker.api.remove_image(pull)  # as it was: the next round pulls it again

    pulls = {} if pull in host.docker.image_tags() else {"Docker: pull an image (and remove it)": pulled}
    return {
        "Docker: list containers": lambda: host.docker.containers("io.rancher.rke.container.name"),
        "Docker: inspect a container": lambda: host.docker.api.inspect_container("kubelet"),
        **pulls,
        "command (exec channel)": lambda: host.run("true"),
        "file written": lambda: host.write_files([scratch]),
        "8 files written at once (a worker's)": lambda: host.write_files(eight),
        "probe over HTTP": lambda: host.http_get("http://localhost:10248/healthz"),
        "probe over TLS": lambda: host.https_get("https://localhost:10250/healthz"),
        "channel refused (a port not open yet)": refused,
    }


def operations(hosts: int, repeat: int) -> list[dict[str, object]]:
    """CPU and SSH packets received per request of each kind, over every host of a lab of its own."""
    import yaml

    from rke_py.cli import run  # noqa: F401  (the CLI's import order: the packages import each other)
    from rke_py.hosts.connections import Connections
    from rke_py.hosts.hostkeys import HostKeyStore
    from rke_py.hosts.ssh import SSHTarget

    name = f"transport{hosts}-operations"
    cluster_yml = lab(hosts, name)
    try:
        rke_py("up", "--config", cluster_yml)
        config = yaml.safe_load(Path(cluster_yml).read_text())
        # an image only etcd hosts have: the others can pull it, and remove it again
        pull = f"{config['private_registries'][0]['url']}/{config['system_images']['etcd']}"
        spent: dict[str, list[float]] = {}
        packets: dict[str, list[int]] = {}
        known_hosts = str(Path(cluster_yml).with_name("known_hosts"))
        with Connections(host_keys=HostKeyStore({}, known_hosts)) as conns:
            for node in config["nodes"]:
                target = SSHTarget(node["address"], 22, node["user"], ssh_key_path=config["ssh_key_path"])
                started = time.process_time()
                host = conns.host(target)
                spent.setdefault("login and Docker version", []).append(time.process_time() - started)
                packetizer = getattr(
                    host.conn.transport, "packetizer", None
                )  # paramiko's; libssh2 counts none
                for kind, request in _requests(host, pull).items():
                    for _ in range(repeat):
                        seen = packetizer._Packetizer__received_packets if packetizer else 0
                        started = time.process_time()
                        request()
                        spent.setdefault(kind, []).append(time.process_time() - started)
                        if packetizer:
                            packets.setdefault(kind, []).append(
                                packetizer._Packetizer__received_packets - seen
                            )
    finally:
        rke_py("lab", "down", "--name", name)
    return [
        {
            "operation": kind,
            "cpu_ms": round(statistics.median(times) * 1000, 2),
            "packets_in": statistics.median(packets[kind]) if kind in packets else None,
        }
        for kind, times in spent.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="24,48", help="two lab sizes, hosts")
    parser.add_argument("--output", choices=("text", "json"), default="text")
    parser.add_argument("--profile", action="store_true", help="where the CPU goes, at the smaller size")
    parser.add_argument("--operations", action="store_true", help="CPU per request, at the smaller size")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of each request per host")
    parser.add_argument("--runs", type=int, default=3, help="runs of each operation")
    parser.add_argument("--profiled", action="store_true", help=argparse.SUPPRESS)  # a child: one command
    args, rest = parser.parse_known_args()
    if args.profiled:
        profiled(rest[1:] if rest[:1] == ["--"] else rest)
        return
    small, large = sorted(int(s) for s in args.sizes.split(","))
    rke_py("lab", "images")  # build and cache images outside the timings
    if args.operations:
        costs = operations(small, args.repeat)
        if args.output == "json":
            print(json.dumps(costs))
            return
        print(f"{'request':>40} | {'cpu_ms':>7} | packets_in")
        for row in costs:
            print(f"{row['operation']!s:>40} | {row['cpu_ms']!s:>7} | {row['packets_in']}")
        return
    rows = measure((small, large), args.runs)
    at = {(r["hosts"], r["operation"]): r for r in rows}
    for operation in OPERATIONS:
        cpu = {hosts: cast(float, at[hosts, operation]["cpu_s"]) for hosts in (small, large)}
        slope = (cpu[large] - cpu[small]) / (large - small)
        at[large, operation]["cpu_ms_per_host"] = round(slope * 1000, 1)
    kinds = profile(small) if args.profile else {}
    if args.output == "json":
        print(json.dumps({"rows": rows, "profile": kinds} if args.profile else rows))
        return
    columns = ("hosts", "operation", "wall_s", "cpu_s", "cpu_ms_per_host", "load", "steal_pct")
    print(" | ".join(f"{c:>15}" for c in columns))
    for row in rows:
        print(" | ".join(f"{row[c]!s:>15}" for c in columns))
    for operation, found in kinds.items():
        total = sum(found["kinds"].values()) or 1
        top = sorted(found["kinds"].items(), key=lambda kv: -kv[1])
        print(f"\n{operation} at {small} hosts, CPU by kind (under yappi):")
        for kind, seconds in top:
            print(f"  {seconds / total:6.1%}  {kind}")
        print("  requests per host: " + ", ".join(f"{k} {n}" for k, n in found["requests_per_host"].items()))


if __name__ == "__main__":
    main()
