"""kubelet stand-in: registers its Node (standard labels, --register-with-taints, addresses), keeps its
status with a heartbeat and a Lease in kube-node-lease, and serves /healthz. It runs no pods.

As the real kubelet with cri-dockerd: the node is Ready only once a CNI config exists in /etc/cni/net.d,
and the kubelet API (port 10250) authenticates client certificates against --client-ca-file and asks the
apiserver (a SubjectAccessReview, as --authorization-mode=Webhook does) before it answers anything."""

import os
import platform
import socket
import ssl
import threading
import time

from rke_py.lab.kube import VERSION, log, objects, serve
from rke_py.lab.kube.client import ApiError, KubeClient, serving_context
from rke_py.lab.kube.flags import FlagError, Flags

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Kubernetes' TaintExternalCloudProvider: a kubelet with --cloud-provider=external registers with it, and a
# cloud controller manager removes it once it has initialised the node.
UNINITIALIZED = {
    "key": "node.cloudprovider.kubernetes.io/uninitialized",
    "value": "true",
    "effect": "NoSchedule",
}
_LEASE_SECONDS = 40
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}
_FILE_FLAGS = ("kubeconfig", "client-ca-file", "tls-cert-file", "tls-private-key-file")
# Where cri-dockerd reads CNI configs; the variable lets tests run a kubelet outside a lab host.
CNI_CONF_DIR = os.environ.get("RKE_PY_LAB_CNI_CONF_DIR", "/etc/cni/net.d")
NETWORK_NOT_READY = (
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:docker: network plugin is not ready: cni config uninitialized"
)
# The kubelet API's subresource of nodes for a path (the real kubelet's authorizer attributes).
_SUBRESOURCES = {"stats": "stats", "metrics": "metrics", "logs": "log", "spec": "spec"}
_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


def network_ready(conf_dir: str = CNI_CONF_DIR) -> bool:
    """Whether a CNI network config exists, as cri-dockerd's CNI plugin decides it."""
    try:
        names = os.listdir(conf_dir)
    except OSError:
        return False
    return any(n.endswith((".conf", ".conflist", ".json")) for n in names)


def api_attributes(method: str, path: str) -> tuple[str, str]:
    """(verb, subresource of nodes) the real kubelet authorizes a kubelet API request as."""
    first = path.split("?", 1)[0].strip("/").split("/", 1)[0]
    return _VERBS.get(method, "get"), _SUBRESOURCES.get(first, "proxy")


def parse_taints(text: str) -> list[dict]:
    """``key=value:Effect,key:Effect`` as --register-with-taints takes them."""
    taints = []
    for item in filter(None, text.split(",")):
        spec, sep, effect = item.rpartition(":")
        key, _, value = spec.partition("=")
        if not sep or not key or effect not in _EFFECTS:
            raise FlagError(f'--register-with-taints: invalid taint spec: "{item}"')
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        taints.append(taint)
    return taints


def parse_labels(text: str) -> dict[str, str]:
    labels = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise FlagError(f'--node-labels: invalid label "{item}"')
        labels[key] = value
    return labels


def _os_image() -> str:
    try:
        with open("/etc/os-release", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "Linux"


def _memory_ki() -> str:
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            return handle.readline().split()[1] + "Ki"
    except (OSError, IndexError):
        return "0"


class Kubelet:
    def __init__(self, flags: Flags) -> None:
        self.flags = flags
        self.client = KubeClient(str(flags.get("kubeconfig")))
        self.name = str(flags.get("hostname-override") or socket.gethostname()).lower()
        self.arch = _ARCH.get(platform.machine(), platform.machine())
        self.taints = parse_taints(str(flags.get("register-with-taints", "")))
        if flags.get("cloud-provider") == "external":
            self.taints.append(UNINITIALIZED)
        self.labels = parse_labels(str(flags.get("node-labels", "")))
        self.registered = False
        self.network_reported = False  # what the last status said of the pod network
        self._transitions: dict[tuple[str, str], str] = {}

    def _addresses(self) -> list[dict]:
        node_ip = self.flags.get("node-ip")
        if not node_ip:
            try:
                node_ip = socket.gethostbyname(socket.gethostname())
            except OSError:
                node_ip = None
        addresses = [{"type": "InternalIP", "address": str(node_ip)}] if node_ip else []
        return [*addresses, {"type": "Hostname", "address": self.name}]

    def _status(self) -> dict:
        now = objects.now_rfc3339()

        def condition(kind: str, status: str, reason: str, message: str) -> dict:
            return {
                "type": kind,
                "status": status,
                "lastHeartbeatTime": now,
                "lastTransitionTime": self._transitions.setdefault((kind, status), now),
                "reason": reason,
                "message": message,
            }

        capacity = {"cpu": str(os.cpu_count() or 1), "memory": _memory_ki(), "pods": "110"}
        self.network_reported = network_ready()
        return {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                condition(
                    "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
                ),
                condition(
                    "PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"
                ),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")
                if self.network_reported
                else condition("Ready", "False", "KubeletNotReady", NETWORK_NOT_READY),
            ],
            "addresses": self._addresses(),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": int(self.flags.get("port", 10250))}},
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": platform.release(),
                "osImage": _os_image(),
                "containerRuntimeVersion": "lab://0.0.0",
                "kubeletVersion": VERSION,
                "kubeProxyVersion": VERSION,
                "operatingSystem": "linux",
                "architecture": self.arch,
            },
        }

    def register(self) -> None:
        """Create the Node; an existing one (a restarted kubelet) keeps its taints and gains our labels."""
        labels = {
            "beta.kubernetes.io/arch": self.arch,
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": self.arch,
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            **self.labels,
        }
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels},
            "spec": {"taints": self.taints} if self.taints else {},
        }
        try:
            self.client.create("/api/v1/nodes", node)
            log.info(f"Successfully registered node {self.name}")
        except ApiError as exc:
            if exc.reason != "AlreadyExists":
                raise
            self.client.merge_patch(f"/api/v1/nodes/{self.name}", {"metadata": {"labels": labels}})
            log.info(f"node {self.name} was previously registered")
        self.registered = True

    def heartbeat(self) -> None:
        self.client.merge_patch(f"/api/v1/nodes/{self.name}/status", {"status": self._status()})
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.name}"
        spec = {
            "holderIdentity": self.name,
            "leaseDurationSeconds": _LEASE_SECONDS,
            "renewTime": objects.now_micro(),
        }
        try:
            self.client.merge_patch(path, {"spec": spec})
        except ApiError as exc:
            if exc.status != 404:
                raise
            node = self.client.get(f"/api/v1/nodes/{self.name}")
            owner = {"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": node["metadata"]["uid"]}
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": "kube-node-lease", "ownerReferences": [owner]},
                "spec": spec,
            }
            self.client.create(path.rsplit("/", 1)[0], lease)

    def authorized(self, user: str, groups: tuple[str, ...], verb: str, subresource: str) -> bool:
        """Ask the apiserver, as the kubelet's webhook authorizer does; ApiError when it cannot answer."""
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": list(groups),
                "resourceAttributes": {
                    "verb": verb,
                    "resource": "nodes",
                    "subresource": subresource,
                    "name": self.name,
                },
            },
        }
        answer = self.client.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        return bool((answer.get("status") or {}).get("allowed"))

    def loop(self) -> None:
        """Post the node status every --node-status-update-frequency, and at once when the network's
        readiness changes (the real kubelet checks its runtime every few seconds and reports a change
        without waiting for the next regular update)."""
        period = float(self.flags.get("node-status-update-frequency", 10.0))
        while True:
            try:
                if not self.registered and self.flags.get("register-node", True):
                    self.register()
                self.heartbeat()
            except ApiError as exc:
                log.error(f"Unable to update node status for {self.name}: {exc}")
                time.sleep(2)
                continue
            deadline = time.monotonic() + period
            while time.monotonic() < deadline and network_ready() == self.network_reported:
                time.sleep(min(1.0, period))


def api_handler(kubelet: Kubelet, anonymous: bool) -> type[serve.Handler]:
    """The kubelet API: authenticated, authorized per request, then answered as a kubelet without pods."""

    class KubeletAPI(serve.Handler):
        def _dispatch(self) -> None:
            peer = (
                serve.peer_identity(self.connection) if isinstance(self.connection, ssl.SSLSocket) else None
            )
            if peer is None and not anonymous:
                self.send(401, b"Unauthorized")
                return
            user, groups = peer or ("system:anonymous", ("system:unauthenticated",))
            verb, subresource = api_attributes(self.command, self.path)
            attrs = f"user={user}, verb={verb}, resource=nodes, subresource={subresource}"
            try:
                allowed = kubelet.authorized(user, groups, verb, subresource)
            except ApiError as exc:
                log.error(f"Authorization error ({attrs}): {exc}")
                self.send(500, f"Authorization error ({attrs})".encode())
                return
            if not allowed:
                self.send(403, f"Forbidden ({attrs})".encode())
                return
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                self.send(200, b"ok")
            elif path == "/pods":
                self.send(200, b'{"kind":"PodList","apiVersion":"v1","items":[]}', "application/json")
            elif path.startswith(("/containerLogs/", "/exec/", "/run/", "/attach/")):
                parts = path.strip("/").split("/")
                pod = "/".join(parts[1:3])
                self.send(404, f'pod "{pod}" not found: the lab kubelet runs no pods'.encode())
            else:
                self.send(404, b"404 page not found\n")

        do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _dispatch

    return KubeletAPI


def run(flags: Flags) -> None:
    for name in _FILE_FLAGS:
        path = flags.get(name)
        if path and not os.path.isfile(str(path)):
            raise FlagError(f"--{name}: stat {path}: no such file or directory")
    if not flags.get("kubeconfig"):
        raise FlagError("--kubeconfig is required (the lab kubelet does not run standalone)")
    kubelet = Kubelet(flags)

    def healthz() -> tuple[int, str]:
        return 200, "ok"

    health = (str(flags.get("healthz-bind-address", "127.0.0.1")), int(flags.get("healthz-port", 10248)))
    serve.start(health, serve.health_handler({"/healthz": healthz}))
    log.info(f"healthz serving on {health[0]}:{health[1]}")
    tls = serving_context(
        str(flags.get("kubeconfig")), flags.get("tls-cert-file"), flags.get("tls-private-key-file")
    )
    if flags.get("client-ca-file"):
        tls.load_verify_locations(str(flags.get("client-ca-file")))
        tls.verify_mode = ssl.CERT_OPTIONAL
    api = (str(flags.get("address", "0.0.0.0")), int(flags.get("port", 10250)))
    serve.start(api, api_handler(kubelet, bool(flags.get("anonymous-auth", True))), tls)
    log.info(f"kubelet API serving on {api[0]}:{api[1]}; node name {kubelet.name}")
    threading.Thread(target=kubelet.loop, name="node-status", daemon=True).start()
    threading.Event().wait()
