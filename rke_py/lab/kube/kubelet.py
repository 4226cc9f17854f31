"""kubelet stand-in: registers its Node (standard labels, --register-with-taints, addresses), keeps it
Ready with a status heartbeat and a Lease in kube-node-lease, and serves /healthz. It runs no pods."""

import os
import platform
import socket
import threading
import time

from rke_py.lab.kube import VERSION, log, objects, serve
from rke_py.lab.kube.client import ApiError, KubeClient, serving_context
from rke_py.lab.kube.flags import FlagError, Flags

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_LEASE_SECONDS = 40
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}
_FILE_FLAGS = ("kubeconfig", "client-ca-file", "tls-cert-file", "tls-private-key-file")


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
        self.labels = parse_labels(str(flags.get("node-labels", "")))
        self.registered = False
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
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
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

    def loop(self) -> None:
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
            time.sleep(period)


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
    # The kubelet API port (10250): only /healthz here, but it answers over TLS like the real one.
    tls = serving_context(
        str(flags.get("kubeconfig")), flags.get("tls-cert-file"), flags.get("tls-private-key-file")
    )
    api = (str(flags.get("address", "0.0.0.0")), int(flags.get("port", 10250)))
    serve.start(api, serve.health_handler({"/healthz": healthz}), tls)
    log.info(f"kubelet API serving on {api[0]}:{api[1]}; node name {kubelet.name}")
    threading.Thread(target=kubelet.loop, name="node-status", daemon=True).start()
    threading.Event().wait()
