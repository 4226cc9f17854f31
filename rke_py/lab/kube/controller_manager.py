"""kube-controller-manager and kube-scheduler stand-ins: leader election on their Lease, /healthz over
HTTPS, and (controller-manager) the node lifecycle check that marks silent nodes NotReady, and in every
namespace the `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap a pod needs."""

import os
import threading
import time
from pathlib import Path

from rke_py.lab.kube import VERSION, log, objects, serve
from rke_py.lab.kube.client import ApiError, KubeClient, serving_context
from rke_py.lab.kube.flags import FlagError, Flags
from rke_py.lab.kube.leaderelection import ElectionConfig, LeaderElector, identity
from rke_py.lab.kube.resources import parse_time

SECURE_PORTS = {"kube-controller-manager": 10257, "kube-scheduler": 10259}
_FILE_FLAGS = (
    "kubeconfig",
    "authentication-kubeconfig",
    "authorization-kubeconfig",
    "root-ca-file",
    "service-account-private-key-file",
    "client-ca-file",
    "tls-cert-file",
    "tls-private-key-file",
    "cluster-signing-cert-file",
    "cluster-signing-key-file",
    "config",
)
_NODE_MONITOR_PERIOD = 5.0
_PUBLISH_PERIOD = 1.0  # the real controllers watch namespaces; a second is as near as a poll gets


def _validate(component: str, flags: Flags) -> None:
    if not flags.get("kubeconfig"):
        raise FlagError("--kubeconfig is required (the lab components have no in-cluster config)")
    for name in _FILE_FLAGS:
        path = flags.values.get(name)
        if path and not os.path.isfile(str(path)):
            raise FlagError(f"--{name}: stat {path}: no such file or directory")
    lock = flags.get("leader-elect-resource-lock", "leases")
    if lock != "leases":
        raise FlagError(f'--leader-elect-resource-lock: only "leases" is supported, got "{lock}"')
    duration = flags.get("leader-elect-lease-duration", 15.0)
    deadline = flags.get("leader-elect-renew-deadline", 10.0)
    retry = flags.get("leader-elect-retry-period", 2.0)
    if not duration > deadline:
        raise FlagError("leaseDuration must be greater than renewDeadline")
    if not deadline > retry * 1.2:
        raise FlagError("renewDeadline must be greater than retryPeriod*JitterFactor")


def _mark_silent_nodes(client: KubeClient, grace: float) -> None:
    """Set Ready=Unknown on nodes whose kubelet has not posted status or renewed its lease in time."""
    leases = {
        item["metadata"]["name"]: parse_time((item.get("spec") or {}).get("renewTime")) or 0.0
        for item in client.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")["items"]
    }
    now = time.time()
    for node in client.get("/api/v1/nodes")["items"]:
        name = node["metadata"]["name"]
        conditions = (node.get("status") or {}).get("conditions") or []
        ready = next((c for c in conditions if c.get("type") == "Ready"), None)
        if ready is None or ready.get("status") == "Unknown":
            continue
        heartbeat = max(leases.get(name, 0.0), parse_time(ready.get("lastHeartbeatTime")) or 0.0)
        if now - heartbeat <= grace:
            continue
        ready.update(
            status="Unknown",
            reason="NodeStatusUnknown",
            message="Kubelet stopped posting node status.",
            lastTransitionTime=objects.now_rfc3339(),
        )
        try:
            client.update(f"/api/v1/nodes/{name}/status", node)
            log.info(f"node {name} hasn't been updated for {int(now - heartbeat)}s: marked NotReady")
        except ApiError as exc:
            log.warning(f"updating status of node {name}: {exc}")


def _publish_to_namespaces(client: KubeClient, as_controller: dict[str, KubeClient], root_ca: str) -> None:
    """The serviceaccount and root-ca-cert-publisher controllers: each namespace gets its `default`
    ServiceAccount (pods are refused without it) and the cluster's CA as `kube-root-ca.crt`, each made as
    its controller's service account (`as_controller`: plural -> that controller's client)."""
    wanted = {
        "serviceaccounts": {"metadata": {"name": "default"}},
        "configmaps": {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": root_ca}},
    }
    have = {
        plural: {
            (item["metadata"]["namespace"], item["metadata"]["name"])
            for item in client.get(f"/api/v1/{plural}")["items"]
        }
        for plural in wanted
    }
    for namespace in client.get("/api/v1/namespaces")["items"]:
        ns = namespace["metadata"]["name"]
        if (namespace.get("status") or {}).get("phase") == "Terminating":
            continue
        for plural, body in wanted.items():
            if (ns, body["metadata"]["name"]) in have[plural]:
                continue
            try:
                as_controller[plural].create(f"/api/v1/namespaces/{ns}/{plural}", body)
                log.info(f"created {plural[:-1]} {ns}/{body['metadata']['name']}")
            except ApiError as exc:
                if exc.status != 409:  # made meanwhile; anything else waits for the next round
                    log.warning(f"creating {plural[:-1]} in {ns}: {exc}")


def _controllers(component: str, client: KubeClient, flags: Flags) -> None:
    if component != "kube-controller-manager":
        return
    grace = float(flags.get("node-monitor-grace-period", 40.0))
    period = float(flags.get("node-monitor-period", _NODE_MONITOR_PERIOD))
    root_ca_file = flags.get("root-ca-file")
    root_ca = Path(str(root_ca_file)).read_text() if root_ca_file else ""
    kubeconfig = str(flags.get("kubeconfig"))
    as_controller = {  # the User-Agent names the controller, as the real one's does
        plural: KubeClient(kubeconfig, f"kube-controller-manager/{VERSION}/{controller}")
        for plural, controller in (
            ("serviceaccounts", "service-account-controller"),
            ("configmaps", "root-ca-cert-publisher"),
        )
    }
    log.info(f"starting node lifecycle controller (grace period {grace:g}s)")
    last_check = 0.0
    while True:
        try:
            _publish_to_namespaces(client, as_controller, root_ca)
            if time.monotonic() - last_check >= period:
                _mark_silent_nodes(client, grace)
                last_check = time.monotonic()
        except ApiError as exc:
            log.warning(f"controllers: {exc}")
        time.sleep(_PUBLISH_PERIOD)


def run(component: str, flags: Flags) -> None:
    _validate(component, flags)
    kubeconfig = str(flags.get("kubeconfig"))
    client = KubeClient(kubeconfig)
    tls = serving_context(kubeconfig, flags.get("tls-cert-file"), flags.get("tls-private-key-file"))

    def healthz() -> tuple[int, str]:
        return 200, "ok"

    handler = serve.health_handler({"/healthz": healthz, "/livez": healthz, "/readyz": healthz})
    address = (
        str(flags.get("bind-address", "0.0.0.0")),
        int(flags.get("secure-port", SECURE_PORTS[component])),
    )
    serve.start(address, handler, tls)
    log.info(f"Serving securely on {address[0]}:{address[1]}")

    if not flags.get("leader-elect", True):
        _controllers(component, client, flags)
        threading.Event().wait()
    config = ElectionConfig(
        namespace=str(flags.get("leader-elect-resource-namespace", "kube-system")),
        name=str(flags.get("leader-elect-resource-name", component)),
        lease_duration=float(flags.get("leader-elect-lease-duration", 15.0)),
        renew_deadline=float(flags.get("leader-elect-renew-deadline", 10.0)),
        retry_period=float(flags.get("leader-elect-retry-period", 2.0)),
    )
    elector = LeaderElector(client, config, identity())
    elector.run(lambda: _controllers(component, client, flags))
    log.fatal("leaderelection lost")
