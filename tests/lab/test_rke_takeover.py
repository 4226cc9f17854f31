"""A cluster `rke up` built (RKE v1.5 built here, Rancher's images, 3 etcd+controlplane nodes and 2 workers
behind nginx-proxy) taken over by `rke-py up` with RKE's own cluster.yml and cluster.rkestate, while a
workload serves and probes never stop: through every worker's nginx-proxy to the API, and to the workload
through its Service and its NodePort. What runs as rke-py would run it is kept; the rest is replaced by the
rolling rules (README, "Taking over a cluster RKE built"). Run with -s to see the counts."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rke_py.lab.state import Lab
from tests.lab.e2e import (
    cluster_args,
    edit_cluster_yml,
    host_exec,
    kubectl,
    own_lab,
    probe_failures,
    rke_py,
    s3_args,
    s3_keys,
    start_probe,
    up,
)
from tests.rke import rke

pytestmark = [pytest.mark.lab, pytest.mark.rke, pytest.mark.rancher_images, pytest.mark.real_addons]

CP, WORKERS, SPARE = (0, 1, 2), (3, 4), 5
NODE_PORT = 30080
# what a takeover replaces, and why (the README's table): every other container is kept
REPLACED = {"etcd-rolling-snapshots": CP}  # on the rke-tools of rke-py's default version
WORKLOAD = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: web
        image: "{image}"
        command: [sh, -c, "mkdir /w && echo web > /w/index.html && exec busybox httpd -f -p 8080 -h /w"]
        readinessProbe: {{tcpSocket: {{port: 8080}}, periodSeconds: 2}}
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  type: NodePort
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: 8080, nodePort: {node_port}}}]
"""


def running(lab: Lab) -> dict[tuple[int, str], tuple[str, str]]:
    """(host, container name) -> (its ID, when it started), for every container but the kubelet's pods."""
    out = {}
    for index in range(len(lab.hosts)):
        ids = host_exec(lab, index, "docker ps -aq").split()
        if not ids:
            continue
        for line in host_exec(
            lab, index, "docker inspect -f '{{.Name}} {{.Id}} {{.State.StartedAt}}' " + " ".join(ids)
        ).splitlines():
            name, cid, started = line.lstrip("/").split(" ")
            if not name.startswith("k8s_"):
                out[(index, name)] = (cid, started)
    return out


def pods(lab: Lab) -> dict[str, int]:
    """The workload's pods by UID, with their restart counts."""
    listed = json.loads(kubectl(lab, "get", "pods", "-l", "app=web", "-o", "json"))["items"]
    return {p["metadata"]["uid"]: p["status"]["containerStatuses"][0]["restartCount"] for p in listed}


@pytest.fixture(scope="module")
def taken(tmp_path_factory) -> Iterator[dict]:
    # the sixth host: the worker added on day 2; S3: for a snapshot RKE saves; CoreDNS, as RKE deploys it
    addons = Path(os.environ["RKE_PY_ADDON_BINARIES"])
    with own_lab(tmp_path_factory, "take", 6, s3=True, addon_binaries=addons) as lab:
        (lab.dir / "s3-ca.pem").write_text(lab.s3_ca)
        edit_cluster_yml(lab, lambda d: d.update(nodes=d["nodes"][:5]))
        rke.up(lab.cluster_yml)
        kubeconfig = Path(lab.cluster_yml).parent / f"kube_config_{Path(lab.cluster_yml).name}"
        rke_kubeconfig = shutil.copy(kubeconfig, kubeconfig.with_name("rke_kubeconfig.yml"))
        image = host_exec(lab, 0, "docker inspect -f '{{.Config.Image}}' service-sidekick").strip()
        kubectl(lab, "apply", "-f", "-", stdin=WORKLOAD.format(image=image, node_port=NODE_PORT))
        kubectl(lab, "rollout", "status", "deployment/web", "--timeout=180s")
        kubectl(lab, "create", "configmap", "from-rke", "--from-literal=kept=yes")
        token = kubectl(lab, "create", "token", "default", "--duration=2h").strip()
        cluster_ip = kubectl(lab, "get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}")
        before, workload = running(lab), pods(lab)
        probes = [(i, f"api-{i}", "") for i in WORKERS] + [
            (WORKERS[0], "service", f"http://{cluster_ip}/"),
            (CP[0], "nodeport", f"http://{lab.hosts[WORKERS[1]].address}:{NODE_PORT}/"),
        ]
        for index, name, url in probes:
            start_probe(lab, index, url=url, name=name)
        started = time.monotonic()
        run = up(lab)
        took = time.monotonic() - started
        failures = {name: probe_failures(lab, index, name) for index, name, _ in probes}
        after = running(lab)
        kept = Counter(name for key, name in before if after.get((key, name)) == before[(key, name)])
        print(f"\ntakeover: rke-py up {took:.0f} s; kept {dict(kept)}")
        print("replaced or restarted", sorted(k for k in before if after.get(k) != before[k]))
        print("probes (answered, failed):", {name: (n, len(f)) for name, (n, f) in failures.items()})
        yield {
            "lab": lab,
            "run": run,
            "before": before,
            "after": after,
            "failures": failures,
            "workload": workload,
            "rke_kubeconfig": rke_kubeconfig,
            "token": token,
        }


def test_up_takes_the_cluster_over(taken):
    run = taken["run"]
    assert run.code == 0, run.stderr
    assert run.json()["ok"] is True, run.json()["verify"]


def test_what_runs_as_planned_is_kept_and_only_the_listed_containers_are_replaced(taken):
    before, after = taken["before"], taken["after"]
    replaced = {key for key, (cid, _) in before.items() if after.get(key, ("", ""))[0] != cid}
    replaced -= {(i, "cluster-state-deployer") for i in range(5)}  # RKE's exited helper: removed
    expected = {(i, name) for name, hosts in REPLACED.items() for i in hosts}
    assert replaced == expected, (sorted(replaced - expected), sorted(expected - replaced))
    # kept and never restarted, but a leader whose own apiserver was replaced under it: it loses its lease
    # and exits, as Kubernetes' leaders do, and Docker starts it again
    restarted = {key for key, seen in before.items() if key not in replaced and after.get(key) != seen}
    restarted -= {(i, "cluster-state-deployer") for i in range(5)}
    assert {name for _, name in restarted} <= {"kube-controller-manager", "kube-scheduler"}, sorted(restarted)
    assert len(restarted) <= 2, sorted(restarted)  # one leader each at most


def test_no_probe_request_failed(taken):
    for name, (answered, failures) in taken["failures"].items():
        assert answered > 0 and failures == [], (name, answered, failures)


def test_the_workload_never_restarted_and_etcds_data_is_intact(taken):
    lab = taken["lab"]
    assert pods(lab) == taken["workload"]
    assert kubectl(lab, "get", "configmap", "from-rke", "-o", "jsonpath={.data.kept}") == "yes"


def test_rkes_kubeconfig_and_the_tokens_its_cluster_issued_still_work(taken):
    lab = taken["lab"]
    with_rkes = subprocess.run(
        ["kubectl", "--kubeconfig", str(taken["rke_kubeconfig"]), "get", "nodes", "--no-headers"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert with_rkes.returncode == 0 and len(with_rkes.stdout.splitlines()) == 5, with_rkes.stderr
    server = kubectl(lab, "config", "view", "-o", "jsonpath={.clusters[0].cluster.server}")
    token_only = ("--kubeconfig", "/dev/null", "--server", server, "--insecure-skip-tls-verify")
    review = subprocess.run(  # the token alone: no client certificate to authenticate instead
        [
            "kubectl",
            *token_only,
            "--token",
            taken["token"],
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert review.stdout == "system:serviceaccount:default:default", review.stderr


def test_a_second_up_changes_nothing(taken):
    again = up(taken["lab"], "--no-verify")
    assert again.code == 0, again.stderr
    assert again.json()["changed"] == 0, again.json()["hosts"]


# Day 2 on the cluster taken over, as its operator goes on with rke-py


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_snapshot_rke_took_is_restored_by_rke_py(taken, where):
    """Saved by `rke etcd snapshot-save` on the etcd hosts, or to S3 (the keys as RKE takes them)."""
    lab = taken["lab"]
    name = f"by-rke-{where}"
    s3 = s3_args(lab, "rke") if where == "s3" else []
    keys = ["--access-key", lab.s3_access_key, "--secret-key", lab.s3_secret_key] if s3 else []
    rke.run("etcd", "snapshot-save", "--name", name, "--config", str(lab.cluster_yml), *s3, *keys)
    kubectl(lab, "create", "configmap", f"after-{name}", "--from-literal=gone=yes")
    restored = rke_py(
        "etcd",
        "snapshot-restore",
        "--name",
        name,
        "--force",
        *cluster_args(lab, "--output", "json"),
        *s3,
        env=s3_keys(lab),
    )
    assert restored.code == 0, restored.stderr
    if s3:
        assert restored.json()["source"] == f"s3://{lab.s3_bucket}/rke/{name}.zip"
    assert kubectl(lab, "get", "configmap", "from-rke", "-o", "jsonpath={.data.kept}") == "yes"
    assert f"configmap/after-{name}" not in kubectl(lab, "get", "configmaps", "-o", "name").split()
    kubectl(lab, "rollout", "status", "deployment/web", "--timeout=180s")


def test_a_worker_is_added_and_removed(taken):
    lab = taken["lab"]
    spare = lab.hosts[SPARE]
    added = {"address": spare.address, "user": "root", "role": ["worker"], "hostname_override": spare.name}
    edit_cluster_yml(lab, lambda d: d["nodes"].append(added))
    run = up(lab)
    assert run.code == 0, run.stderr
    assert " Ready " in kubectl(lab, "get", "node", spare.name, "--no-headers")
    edit_cluster_yml(lab, lambda d: d.update(nodes=d["nodes"][:5]))
    run = up(lab)
    assert run.code == 0, run.stderr
    assert spare.name not in kubectl(lab, "get", "nodes", "-o", "name")
    assert host_exec(lab, SPARE, "docker ps -q").strip() == ""


def test_certificates_are_rotated(taken):
    lab = taken["lab"]
    run = rke_py("cert", "rotate", *cluster_args(lab, "--output", "json"))
    assert run.code == 0, run.stderr
    nodes = kubectl(lab, "get", "nodes", "--no-headers").splitlines()
    assert len(nodes) == 5 and all(" Ready " in line for line in nodes), nodes


def test_secrets_encryption_is_turned_on_and_its_key_rotated(taken):
    lab = taken["lab"]
    kubectl(lab, "create", "secret", "generic", "day-two", "--from-literal=password=kept")
    edit_cluster_yml(
        lab,
        lambda d: (
            d.setdefault("services", {})
            .setdefault("kube-api", {})
            .update({"secrets_encryption_config": {"enabled": True}})
        ),
    )
    run = up(lab)
    assert run.code == 0, run.stderr
    rotated = rke_py("encrypt", "rotate-key", *cluster_args(lab))
    assert rotated.code == 0, rotated.stderr
    key = "/registry/secrets/default/day-two"
    stored = host_exec(lab, 0, f"docker exec etcd etcdctl get {key} --print-value-only")
    assert stored.startswith("k8s:enc:aescbc:v1:"), stored[:40]
    password = kubectl(lab, "get", "secret", "day-two", "-o", "jsonpath={.data.password}")
    assert base64.b64decode(password) == b"kept"


def test_rke_up_still_works_after_rke_py_changed_the_cluster(taken):
    """No lock-in: after rke-py changed something, `rke up` with the same files brings the cluster back to
    RKE's containers (it replaces those rke-py runs otherwise) and the cluster keeps serving."""
    lab = taken["lab"]
    edit_cluster_yml(
        lab,
        lambda d: d.setdefault("services", {}).setdefault("kubelet", {}).update({"extra_args": {"v": "3"}}),
    )
    changed = up(lab)
    assert changed.code == 0, changed.stderr
    before = running(lab)
    handed_back = time.monotonic()
    rke.up(lab.cluster_yml)
    after = running(lab)
    print("\nrke up after rke-py replaced", sorted(k for k in before if after.get(k) != before[k]))
    print("nodes when rke up returned:", kubectl(lab, "get", "nodes", "--no-headers"))
    started = time.monotonic()
    kubectl(lab, "wait", "--for=condition=Ready", "node", "--all", "--timeout=180s")
    print(f"every node Ready {time.monotonic() - started:.0f} s later")
    kubectl(lab, "rollout", "status", "deployment/web", "--timeout=120s")
    assert "--v=3" in host_exec(lab, WORKERS[0], "docker inspect -f '{{.Args}}' kubelet")
    # the pods' tokens, which rke-py's apiservers signed, are accepted by RKE's
    since = f"--since={int(time.monotonic() - handed_back) + 5}s"
    dns_logs = kubectl(lab, "-n", "kube-system", "logs", "-l", "k8s-app=kube-dns", "--tail=-1", since)
    assert "Unauthorized" not in dns_logs  # with a selector, kubectl would give only each pod's last 10 lines
