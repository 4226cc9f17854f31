"""Helpers for end-to-end tests: run the real CLI against a lab, read a lab host's Docker from outside."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
from ruamel.yaml import YAML

from rke_py.lab import clusteryml, hosts
from rke_py.lab.state import Lab
from tests.lab.conftest import cluster_images, owned_lab_name


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@contextlib.contextmanager
def own_lab(tmp_path_factory, suffix: str, nodes: int, **options: Any) -> Iterator[Lab]:
    """A lab only this test module uses (its tests change the cluster), removed afterwards; `options` go
    to `hosts.up` (user, private_registry). With RKE_PY_KEEP_LABS=1 it is left up as `kept-SUFFIX`, where
    `rke-py lab` and `scripts/conformance --existing --name kept-SUFFIX` find it (serving the suite's
    images when RKE_PY_E2E names them), and its cluster can be tried further by hand."""
    if os.environ.get("RKE_PY_KEEP_LABS") == "1":
        suite = os.environ.get("RKE_PY_E2E")
        made = hosts.up(
            f"kept-{suffix}", nodes, None, **cluster_images(), e2e=Path(suite) if suite else None, **options
        )
        yield made
        print(f"\nlab {made.name} kept ({made.dir}); remove it with: rke-py lab down --name {made.name}")
        return
    name = owned_lab_name(suffix)
    directory = str(tmp_path_factory.mktemp("labs") / name)
    made = hosts.up(name, nodes, directory, **cluster_images(), **options)
    try:
        yield made
    finally:
        hosts.down(made.name, str(made.dir))


def rke_py(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> Run:
    """`rke-py ARGS` as a user runs it: a new process, stdin not a terminal; `env` adds to its environment."""
    done = subprocess.run(
        [sys.executable, "-m", "rke_py", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    return Run(done.returncode, done.stdout, done.stderr)


def cluster_args(lab: Lab, *extra: str) -> list[str]:
    """The lab's --config and strict known_hosts (clusteryml.cluster_args), then `extra`."""
    return [*clusteryml.cluster_args(lab), *extra]


def up(lab: Lab, *extra: str) -> Run:
    return rke_py("up", *cluster_args(lab, "--output", "json", *extra))


def changes(doc: dict) -> dict[str, list[tuple[str, str]]]:
    """address → [(kind, target)] from an `up`/`plan --output json` document."""
    return {h["address"]: [(a["kind"], a["target"]) for a in h["actions"]] for h in doc["hosts"]}


def host_exec(lab: Lab, index: int, cmd: str) -> str:
    """Run a shell command on lab host `index` (0-based) through the outer Docker engine: a test oracle
    that does not share rke-py's SSH code."""
    container = docker.from_env().containers.get(lab.hosts[index].name)
    _, out = container.exec_run(["sh", "-c", cmd])
    return out.decode(errors="replace")


def containers_on(lab: Lab, index: int) -> dict[str, str]:
    """name → id of the containers rke-py manages on a lab host."""
    out = host_exec(lab, index, "docker ps -a --filter label=io.rke-py.managed --format '{{.Names}} {{.ID}}'")
    return dict(line.split() for line in out.splitlines() if line.strip())


def edit_cluster_yml(lab: Lab, change) -> None:
    """Apply `change(data)` to the lab's cluster.yml, keeping its comments and layout."""
    yaml = YAML()
    path = Path(lab.cluster_yml)
    data = yaml.load(path.read_text())
    change(data)
    with path.open("w") as f:
        yaml.dump(data, f)


def kubectl_run(lab: Lab, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """kubectl with the admin kubeconfig `up` wrote beside cluster.yml."""
    kubeconfig = Path(lab.cluster_yml).parent / f"kube_config_{Path(lab.cluster_yml).name}"
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def kubectl(lab: Lab, *args: str, stdin: str | None = None) -> str:
    done = kubectl_run(lab, *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done.stdout


def pause_image(lab: Lab) -> str:
    """The image every node has (the kubelet's pod infra image), for a pod that needs nothing else."""
    args = json.loads(host_exec(lab, 0, "docker inspect -f '{{json .Args}}' kubelet"))
    return next(a.split("=", 1)[1] for a in args if a.startswith("--pod-infra-container-image="))


# Requests a probe makes ten times a second: the node's own Node object through its nginx-proxy, as its
# kubelet asks; or a URL (a Service's ClusterIP), as a pod on the node would. The node's certificate and
# key are copied first: a rotation writes the two one after the other, and a request reading them in
# between would fail on a pair that does not match, before it reached the proxy.
API_REQUEST = (
    "curl -s -o /tmp/{name}.answer -w '%{{http_code}} %{{time_total}}' --max-time {timeout} "
    "--cacert /etc/kubernetes/ssl/kube-ca.pem --cert /tmp/{name}.pem --key /tmp/{name}-key.pem "
    "https://127.0.0.1:6443/api/v1/nodes/{node}"
)
API_CREDENTIALS = (
    "cp /etc/kubernetes/ssl/kube-node.pem /tmp/{name}.pem && "
    "cp /etc/kubernetes/ssl/kube-node-key.pem /tmp/{name}-key.pem && "
)
URL_REQUEST = "curl -s -o /tmp/{name}.answer -w '%{{http_code}} %{{time_total}}' --max-time {timeout} {url}"
# a DNS query as a line like curl's: 200 when answered, 000 when not (busybox's nslookup)
DNS_REQUEST = (
    "sh -c 'if timeout {timeout} nslookup {name} {server} >/dev/null 2>&1; then echo 200 0; "
    "else echo 000 {timeout}; fi'"
)
PROBE = (  # a failure is logged with its HTTP code (000: no answer), seconds taken and when it started,
    # and what was answered, if anything, in {name}.failed
    "rm -f /tmp/{name}.log /tmp/{name}.stop /tmp/{name}.failed; "
    "while [ ! -e /tmp/{name}.stop ]; do "
    "rm -f /tmp/{name}.answer; at=$(date +%s); set -- $({request}); "
    'if [ "$1" = 200 ]; then echo "ok $2" >> /tmp/{name}.log; else echo "fail $1 $2 $at" >> /tmp/{name}.log; '
    '{{ echo "$at $1: $(head -c 400 /tmp/{name}.answer 2>/dev/null)"; }} >> /tmp/{name}.failed; fi; '
    "sleep 0.1; done"
)


def start_probe(
    lab: Lab,
    index: int,
    url: str = "",
    name: str = "probe",
    timeout: float = 2,
    dns: tuple[str, str] = ("", ""),
) -> None:
    """Request this node's Node object through its nginx-proxy (or `url`, or the name `dns[0]` from the
    DNS server `dns[1]`) until `stop_probe`; a request without an answer in `timeout` seconds is a failure."""
    container = docker.from_env().containers.get(lab.hosts[index].name)
    node = lab.hosts[index].name
    if dns[0]:
        request = DNS_REQUEST.format(name=dns[0], server=dns[1], timeout=int(timeout))
    elif url:
        request = URL_REQUEST.format(url=url, timeout=timeout, name=name)
    else:
        request = API_REQUEST.format(node=node, timeout=timeout, name=name)
    setup = API_CREDENTIALS.format(name=name) if not (dns[0] or url) else ""
    container.exec_run(["sh", "-c", setup + PROBE.format(name=name, request=request)], detach=True)


def stop_probe(lab: Lab, index: int, name: str = "probe") -> tuple[int, dict[str, int]]:
    """(answered requests, failed ones by HTTP code, 000 for no answer) since `start_probe`."""
    answered, failures = probe_failures(lab, index, name)
    failed: dict[str, int] = {}
    for code, _, _ in failures:
        failed[code] = failed.get(code, 0) + 1
    return answered, failed


def probe_failures(lab: Lab, index: int, name: str = "probe") -> tuple[int, list[tuple[str, float, int]]]:
    """Stop the probe: (answered requests, each failure as (HTTP code, seconds it took, epoch second))."""
    host_exec(lab, index, f"touch /tmp/{name}.stop; sleep 2.5")
    lines = host_exec(lab, index, f"cat /tmp/{name}.log").splitlines()
    failures = [
        (code, float(took), int(at))
        for line in lines
        if line.startswith("fail ") and len(parts := line.split()) == 4
        for code, took, at in [parts[1:]]
    ]
    return sum(line.startswith("ok") for line in lines), failures


def failed_answers(lab: Lab, index: int, name: str = "probe") -> str:
    """What a stopped probe's failed requests were answered, a line each: epoch second, HTTP code, body."""
    return host_exec(lab, index, f"cat /tmp/{name}.failed 2>/dev/null")


def slow_answers(lab: Lab, index: int, seconds: float, name: str = "probe") -> int:
    """How many requests of a stopped probe were answered, but after more than `seconds`."""
    lines = host_exec(lab, index, f"cat /tmp/{name}.log").splitlines()
    return sum(1 for line in lines if line.startswith("ok ") and float(line.split()[1]) > seconds)


def s3_args(lab, folder: str = "manual") -> list[str]:
    """RKE's S3 flags for the lab's S3 server; rke-py takes the keys from the environment (`s3_keys`)."""
    return [
        "--s3",
        "--s3-endpoint",
        lab.s3_endpoint,
        "--bucket-name",
        lab.s3_bucket,
        "--folder",
        folder,
        "--s3-endpoint-ca",
        str(lab.dir / "s3-ca.pem"),
    ]


def s3_keys(lab) -> dict[str, str]:
    return {"RKE_PY_S3_ACCESS_KEY": lab.s3_access_key, "RKE_PY_S3_SECRET_KEY": lab.s3_secret_key}
