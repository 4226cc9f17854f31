"""How long disaster recovery takes on a 3-node lab (every node etcd, controlplane and worker) with the
lab's S3 server: snapshot-save (hosts only, and with S3), snapshot-list, and snapshot-restore (from a host,
and from S3), each including its `up` and verify.

Prints a table; asserts nothing. Run: python benchmarks/bench_snapshots.py [--kubernetes-binaries DIR]
(default $RKE_PY_KUBE_BINARIES; without it the lab's stand-ins run).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from bench_up import rke_py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes-binaries", default=os.environ.get("RKE_PY_KUBE_BINARIES"))
    binaries = parser.parse_args().kubernetes_binaries
    extra = ["--kubernetes-binaries", binaries] if binaries else []
    name = "benchdr"
    lab = json.loads(
        rke_py("lab", "up", "--nodes", "3", "--name", name, "--s3", *extra, "--output", "json").stdout
    )
    directory = Path(lab["dir"])
    state = json.loads((directory / "lab.json").read_text())
    (directory / "s3-ca.pem").write_text(state["s3_ca"])
    os.environ["RKE_PY_S3_ACCESS_KEY"] = state["s3_access_key"]
    os.environ["RKE_PY_S3_SECRET_KEY"] = state["s3_secret_key"]
    s3 = ["--s3", "--endpoint", state["s3_endpoint"], "--bucket-name", state["s3_bucket"]]
    s3 += ["--s3-endpoint-ca", str(directory / "s3-ca.pem")]
    config = ["--config", lab["cluster_yml"]]
    try:
        rows = {"up (new cluster)": rke_py("up", *config)}
        rows["snapshot-save, 3 etcd hosts"] = rke_py("etcd", "snapshot-save", "--name", "a", *config)
        rows["snapshot-save, 3 etcd hosts + S3"] = rke_py(
            "etcd", "snapshot-save", "--name", "b", *config, *s3
        )
        rows["snapshot-list, hosts + S3"] = rke_py("etcd", "snapshot-list", *config, *s3)
        rows["snapshot-restore from a host, with up"] = rke_py(
            "etcd", "snapshot-restore", "--name", "a", "--force", *config
        )
        rows["snapshot-restore from S3, with up"] = rke_py(
            "etcd", "snapshot-restore", "--name", "b", "--force", *config, *s3
        )
    finally:
        rke_py("lab", "down", "--name", name)
    print(f"{'3 nodes, ' + ('real Kubernetes' if binaries else 'stand-ins'):40} {'wall s':>7} {'CPU s':>6}")
    for label, timed in rows.items():
        print(f"{label:40} {timed.seconds:7.1f} {timed.cpu:6.1f}")


if __name__ == "__main__":
    main()
