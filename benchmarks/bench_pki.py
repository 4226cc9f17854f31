"""How long the certificate bundle takes: new, rebuilt from a state file's text, and files for every node.

Prints a table; asserts nothing. Run: python benchmarks/bench_pki.py [--repeat 5]
RSA key generation dominates a new bundle: one key per certificate, and etcd adds one per etcd node.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from rke_py.config.schema import ClusterConfig, Node
from rke_py.pki import build_bundle
from rke_py.plan.cert_files import node_files
from rke_py.state import ClusterState, State, state_from_json, state_to_json


def cluster(size: int, etcd: int) -> ClusterConfig:
    nodes = []
    for n in range(1, size + 1):
        roles = ["controlplane", "etcd"] if n <= etcd else ["worker"]
        nodes.append(
            Node(
                address=f"10.1.0.{n}", internal_address=f"172.20.0.{n}", hostname_override=f"n{n}", role=roles
            )
        )
    config = ClusterConfig(nodes=nodes, cluster_name="bench", prefix_path="/")
    config.services.kube_api.service_cluster_ip_range = "10.43.0.0/16"
    config.services.kubelet.cluster_domain = "cluster.local"
    return config


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs), max(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    print(f"{'case':44} {'median s':>9} {'max s':>7}")
    for size, etcd in ((5, 3), (50, 5)):
        config = cluster(size, etcd)
        bundle = build_bundle(config)
        text = state_to_json(ClusterState(desired=State(certificates=bundle)))
        rows = {
            f"new bundle, {size} nodes ({len(bundle)} certs)": lambda c=config: build_bundle(c),
            f"state text -> parse -> rebuild, {size} nodes": lambda c=config, t=text: build_bundle(
                c, state_from_json(t).desired.certificates
            ),
            f"node_files for all {size} nodes": lambda c=config, b=bundle: [
                node_files(c, b, n) for n in c.nodes
            ],
        }
        for name, fn in rows.items():
            median, worst = timed(fn, repeat)
            print(f"{name:44} {median:9.3f} {worst:7.3f}")


if __name__ == "__main__":
    main()
