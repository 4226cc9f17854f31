"""RKE's flannel and metrics-server add-ons running for real: images built from their public source
(`lab up --addon-binaries` with flanneld, the flannel CNI plugin and metrics-server), served under KDM's
names, and a lab whose hosts bring no pod network of their own. Pods on different nodes reach each other
through flannel's VXLAN, a ClusterIP Service answers from a node that runs none of its pods, and
`kubectl top` answers from metrics-server through the aggregated API."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.lab.e2e import host_exec, kubectl, kubectl_run, own_lab, up

pytestmark = [pytest.mark.lab, pytest.mark.real_kubernetes, pytest.mark.real_addons]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    addons = Path(os.environ["RKE_PY_ADDON_BINARIES"])
    with own_lab(tmp_path_factory, "flannel", 3, addon_binaries=addons) as made:
        assert made.flannel and "metrics_server" in made.addons, made.addons
        run = up(made)
        assert run.code == 0, run.stderr
        yield made


def serve(lab, name: str, node: int) -> str:
    """A pod on lab host `node` answering HTTP on port 8080 with its name; returns its IP."""
    image = f"{lab.registry}/{lab.images['rke-tools']}"
    script = f"mkdir -p /www && echo {name} > /www/index.html && exec httpd -f -p 8080 -h /www"
    overrides = json.dumps({"spec": {"nodeName": lab.hosts[node].name}})
    kubectl(
        lab, "run", name, f"--image={image}", "--restart=Never", f"--labels=app={name}",
        f"--overrides={overrides}", "--command", "--", "sh", "-c", script,
    )  # fmt: skip
    kubectl(lab, "wait", "--for=condition=Ready", f"pod/{name}", "--timeout=120s")
    return kubectl(lab, "get", "pod", name, "-o", "jsonpath={.status.podIP}").strip()


# An HTTP request with busybox's nc (Debian's static busybox wget crashes): the answer's body
REQUEST = "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 5 nc {ip} {port} | tail -n 1"


def answer(lab, node: int, ip: str, port: int, tries: int = 20) -> str:
    """What ip:port answers when lab host `node` asks it (kube-proxy may need a moment to program it)."""
    got = ""
    for _ in range(tries):
        got = host_exec(lab, node, REQUEST.format(ip=ip, port=port)).strip()
        if got:
            return got
        time.sleep(1)
    return got


def test_flannel_runs_on_every_node_and_they_are_ready(lab):
    kubectl(lab, "-n", "kube-system", "rollout", "status", "daemonset/kube-flannel", "--timeout=180s")
    nodes = kubectl(lab, "get", "nodes", "--no-headers").splitlines()
    assert len(nodes) == 3 and all(" Ready " in line for line in nodes), nodes
    for i in range(3):
        assert "DEVTYPE=vxlan" in host_exec(lab, i, "cat /sys/class/net/flannel.1/uevent")
        assert "10-flannel.conflist" in host_exec(lab, i, "ls /etc/cni/net.d")
        assert "10-lab.conflist" not in host_exec(lab, i, "ls /etc/cni/net.d")  # the lab's own network is off


def test_a_pod_reaches_a_pod_on_another_node_through_vxlan(lab):
    ip = serve(lab, "web", 1)
    route = host_exec(lab, 0, f"ip route get {ip}")
    assert " dev flannel.1 " in route, route  # the other node's pod subnet is behind the VXLAN device
    image = f"{lab.registry}/{lab.images['rke-tools']}"
    overrides = json.dumps({"spec": {"nodeName": lab.hosts[0].name}})
    done = kubectl_run(
        lab, "run", "client", f"--image={image}", "--restart=Never", "--attach", "--rm", "-q",
        f"--overrides={overrides}", "--command", "--", "sh", "-c", REQUEST.format(ip=ip, port=8080),
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "web", (done.stdout, done.stderr)


def test_a_cluster_ip_answers_from_a_node_without_endpoints(lab):
    kubectl(lab, "expose", "pod", "web", "--port=80", "--target-port=8080")
    cluster_ip = kubectl(lab, "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}").strip()
    assert answer(lab, 2, cluster_ip, 80) == "web"


def test_kubectl_top_answers_for_nodes_and_pods(lab):
    kubectl(lab, "-n", "kube-system", "rollout", "status", "deployment/metrics-server", "--timeout=180s")
    nodes: list[str] = []
    for _ in range(90):  # a first scrape, then one more 15 s later, before a node has usage to show
        done = kubectl_run(lab, "top", "nodes", "--no-headers")
        nodes = done.stdout.splitlines() if done.returncode == 0 else []
        if len(nodes) == 3:
            break
        time.sleep(2)
    assert {line.split()[0] for line in nodes} == {h.name for h in lab.hosts}, nodes
    pods = kubectl(lab, "top", "pods", "-A", "--no-headers").splitlines()
    assert any(line.split()[1].startswith("kube-flannel") for line in pods), pods
