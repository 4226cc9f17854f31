"""A Kubernetes upgrade as an operator runs it, measured: a 5-node lab (three etcd+controlplane, two workers)
on real binaries FROM, with a Deployment of two web pods behind a Service, upgraded to real binaries TO
with `drain: true` and `max_unavailable_worker: 1`, while every worker asks the API through its
nginx-proxy and the Service's ClusterIP ten times a second.

Prints the time per plane, the total, and each probe's answered and failed requests; asserts nothing.
Run: python benchmarks/bench_upgrade.py --from ~/k8s-bin/v1.28.0 --to ~/k8s-bin/v1.28.7
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))  # the tests' lab helpers: one probe for tests and this

from bench_up import rke_py
from ruamel.yaml import YAML

from rke_py.lab.state import Lab
from tests.lab.e2e import kubectl, probe_failures, slow_answers, start_probe

NAME = "benchupgrade"
TIMEOUT = 10  # seconds a probe request may take; slower than 2 s is counted apart
WORKERS = (3, 4)
WEB = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: default}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
        - name: web
          image: {image}
          command: [sh, -c, "mkdir -p /srv && echo ok > /srv/index.html && exec httpd -f -p 8080 -h /srv"]
          readinessProbe: {{httpGet: {{path: /, port: 8080}}, periodSeconds: 1}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: default}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: 8080}}]
"""


def strategy(lab: Lab) -> None:
    yaml = YAML()
    data = yaml.load(lab.cluster_yml.read_text())
    data["upgrade_strategy"] = {
        "drain": True,
        "max_unavailable_worker": 1,
        "node_drain_input": {"ignore_daemonsets": True, "delete_empty_dir_data": True, "timeout": 120},
    }
    with lab.cluster_yml.open("w") as out:
        yaml.dump(data, out)


def phase_marks(log: Path) -> list[tuple[dt.datetime, str]]:
    """When each phase of the last run began, and when the run's last line was written."""
    lines = log.read_text().splitlines()
    start = max(i for i, line in enumerate(lines) if "DEBUG rke_py rke-py up " in line)
    marks = []
    for line in lines[start:]:
        match = re.match(r"(\S+ \S+) (\w+) (\S+) (.*)", line)
        if not match:
            continue
        when = dt.datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=dt.UTC)
        if match[4].startswith("phase: ") or "batch" in match[4]:
            marks.append((when, match[4].removeprefix("phase: ")))
        last = when
    return [*marks, (last, "end")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="old", required=True, help="directory of the binaries to start on")
    parser.add_argument("--to", dest="new", required=True, help="directory of the binaries to upgrade to")
    args = parser.parse_args()
    made = json.loads(
        rke_py(
            "lab", "up", "--nodes", "5", "--name", NAME, "--kubernetes-binaries", args.old, "--output", "json"
        ).stdout
    )
    lab = Lab.load(Path(made["dir"]))
    log = lab.dir / "upgrade.log"
    try:
        strategy(lab)
        rke_py("up", "--config", str(lab.cluster_yml))
        image = f"{lab.registry}/{lab.images['rke-tools']}"
        kubectl(lab, "apply", "-f", "-", stdin=WEB.format(image=image))
        kubectl(lab, "rollout", "status", "deployment/web", "--timeout=180s")
        ip = kubectl(lab, "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}").strip()
        before = kubectl(lab, "get", "nodes", "-o", "jsonpath={.items[*].status.nodeInfo.kubeletVersion}")
        rke_py("lab", "up", "--nodes", "5", "--name", NAME, "--kubernetes-binaries", args.new)
        strategy(lab)  # lab up wrote cluster.yml again, with the new images and version
        for i in WORKERS:
            start_probe(lab, i, timeout=TIMEOUT)
            start_probe(lab, i, url=f"http://{ip}/", name="service", timeout=TIMEOUT)
        time.sleep(3)
        upgrade = rke_py("up", "--config", str(lab.cluster_yml), "--log-file", str(log))
        time.sleep(3)
        probes = {i: (probe_failures(lab, i), probe_failures(lab, i, name="service")) for i in WORKERS}
        slow = {(i, n): slow_answers(lab, i, 2, n) for i in WORKERS for n in ("probe", "service")}
        after = kubectl(lab, "get", "nodes", "-o", "jsonpath={.items[*].status.nodeInfo.kubeletVersion}")
        marks = phase_marks(log)
    finally:
        rke_py("lab", "down", "--name", NAME)
    print(f"kubelets before: {before}\nkubelets after:  {after}")
    print(f"{'upgrade: phases and batches':60} {'seconds':>8}")
    for (when, title), (after, _) in itertools.pairwise(marks):
        print(f"  {when:%H:%M:%S} {title[:48]:48} {(after - when).total_seconds():8.1f}")
    print(f"  {'total (rke-py up, wall)':57} {upgrade.seconds:8.1f}")
    print(f"{'probe (10/s per worker)':44} {'answered':>8} {'> 2 s':>6} {'failed':>7}")
    for i, (api, service) in probes.items():
        for label, name, (ok, failures) in (
            (f"{lab.hosts[i].name}: API via nginx-proxy", "probe", api),
            (f"{lab.hosts[i].name}: Service {ip}", "service", service),
        ):
            print(f"  {label:42} {ok:8} {slow[i, name]:6} {len(failures):7}")
            for code, took, at in failures:
                print(f"    failed at {dt.datetime.fromtimestamp(at, dt.UTC):%H:%M:%S}: {code} after {took}s")


if __name__ == "__main__":
    main()
