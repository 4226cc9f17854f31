"""Prove the cluster works: etcd, apiservers, every node's proxy, leader leases, nodes, and that a user's
first pod is taken (every namespace the cluster was made with has its ServiceAccount and root CA, and the
admission chain admits a pod).

Read-only. Each check is a row in the Report, so `status` and the end of `up` show the same thing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from rke_py.addons.k8s import object_ref
from rke_py.config.schema import ClusterConfig
from rke_py.deploy.seeds import NAMESPACES, ROOT_CA
from rke_py.errors import VerifyError
from rke_py.hosts.base import DockerError, HostConnection
from rke_py.kube.api import KubeAPI, KubeAPIError, node_ready
from rke_py.pki.certs import CertKeyPair
from rke_py.plan.kubelet import role_taints
from rke_py.plan.model import ClusterPlan, NodePlan
from rke_py.verify.health import probe

LEASES = ("kube-controller-manager", "kube-scheduler")
CLUSTER_CHECKS = ("host", "lease", "node", "addon", "namespace", "pod")  # rows not of one node's probes
# A pod any Pod Security level admits, sent with dryRun: admission runs, nothing is stored or scheduled.
_RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 65535,
    "seccompProfile": {"type": "RuntimeDefault"},
}
BESIDE = 8  # a node's probes and file hashes at once: more than any node has (threads start as needed)


@dataclass
class Check:
    name: str  # docker, etcd, kube-apiserver, nginx-proxy, lease, node, addon, namespace, pod
    target: str  # host address or object name
    ok: bool
    detail: str
    busy: bool = False  # its server took the connection and said nothing in time (not in the JSON)


@dataclass
class Lease:
    name: str
    holder: str
    holder_node: str  # the controlplane node the holder runs on, "" if none matches
    age_seconds: float
    duration_seconds: int
    transitions: int


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    leases: list[Lease] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def failures(self, skipped: Collection[str] = ()) -> list[Check]:
        """Failed checks, but those about `skipped` targets (hosts `up` knew it could not reach)."""
        return [c for c in self.checks if not c.ok and c.target not in skipped]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [{k: v for k, v in asdict(c).items() if k != "busy"} for c in self.checks],
            "leases": [asdict(x) for x in self.leases],
        }


def verify(
    config: ClusterConfig,
    plan: ClusterPlan,
    bundle: Mapping[str, CertKeyPair],
    hosts: Mapping[str, HostConnection],
    hostnames: Mapping[str, str],
    api: KubeAPI,
    workloads: Sequence[tuple[str, dict[str, Any]]],
    concurrency: int,
    again: Report | None = None,
    known: Mapping[str, Mapping[str, str | None]] | None = None,
) -> Report:
    """Run every check. `hosts` maps node address → host (hosts missing from it were reported
    unreachable by the caller); `hostnames` address → the host's own name; `workloads` (add-on name,
    DaemonSet or Deployment) are the add-ons' rollouts to check; `concurrency` nodes are probed at once,
    while the API's answers (leases, Nodes, rollouts) are read beside them. With `again`, an earlier
    report, a node all of whose checks passed there keeps them: `up` waiting for the cluster to settle
    asks the API again each round, and probes only the nodes that still fail. `known`: node address →
    the file hashes the run already knows there (observed, or written since); only others are read."""
    report = Report()
    passed = _passed_nodes(again) if again else {}
    reachable = [n for n in config.nodes if n.address in hosts and n.address not in passed]
    workers = max(1, min(concurrency, len(reachable)))
    with (
        ThreadPoolExecutor(max_workers=1) as api_side,
        ThreadPoolExecutor(max_workers=workers * BESIDE) as beside,
        ThreadPoolExecutor(max_workers=workers) as pool,
    ):
        cluster = api_side.submit(_cluster_checks, config, hostnames, api, workloads)
        per_node = pool.map(
            lambda n: _node_checks(
                plan.node(n.address), bundle, hosts[n.address], beside, (known or {}).get(n.address, {})
            ),
            reachable,
        )
        done = dict(zip((n.address for n in reachable), per_node, strict=True))
        for node in config.nodes:
            report.checks += passed.get(node.address) or done.get(node.address, [])
        report.checks += cluster.result().checks
        report.leases = cluster.result().leases
    return report


def _passed_nodes(report: Report) -> dict[str, list[Check]]:
    """Node address → its rows in `report`, for nodes where every row passed."""
    rows: dict[str, list[Check]] = {}
    for check in report.checks:
        if check.name not in CLUSTER_CHECKS:
            rows.setdefault(check.target, []).append(check)
    return {target: checks for target, checks in rows.items() if all(c.ok for c in checks)}


def _cluster_checks(
    config: ClusterConfig,
    hostnames: Mapping[str, str],
    api: KubeAPI,
    workloads: Sequence[tuple[str, dict[str, Any]]],
) -> Report:
    """What the API answers: the leader leases, the Nodes, the add-ons' rollouts, the namespaces' accounts
    and a pod's admission."""
    report = Report()
    _check_leases(report, config, hostnames, api)
    _check_nodes(report, config, api)
    report.checks += [_rollout(addon, workload, api) for addon, workload in workloads]
    report.checks += [_namespace(ns, api) for ns in NAMESPACES]
    report.checks.append(_first_pod(config, api))
    return report


def _namespace(ns: str, api: KubeAPI) -> Check:
    """The controller-manager gives a namespace its `default` ServiceAccount and the cluster's CA as
    `kube-root-ca.crt` a moment after it leads: until then every pod there is refused."""
    missing = []
    try:
        for what, path in (
            ("ServiceAccount default", f"/api/v1/namespaces/{ns}/serviceaccounts/default"),
            (f"ConfigMap {ROOT_CA}", f"/api/v1/namespaces/{ns}/configmaps/{ROOT_CA}"),
        ):
            if api.find(path) is None:
                missing.append(what)
    except KubeAPIError as exc:
        return Check("namespace", ns, False, str(exc))
    if missing:
        return Check("namespace", ns, False, f"no {' or '.join(missing)} yet: pods there are refused")
    return Check("namespace", ns, True, f"ServiceAccount default and {ROOT_CA}")


def _first_pod(config: ClusterConfig, api: KubeAPI) -> Check:
    """A user's first `kubectl run` in `default`, as the admission chain answers it (dry run)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "rke-py-first-pod"},
        "spec": {
            "containers": [
                {
                    "name": "pause",
                    "image": config.system_images.pod_infra_container,
                    "securityContext": _RESTRICTED,
                }
            ]
        },
    }
    try:
        api.request("POST", "/api/v1/namespaces/default/pods?dryRun=All", pod)
    except KubeAPIError as exc:
        unready = "service account" in str(exc) or exc.status in (401, 404) or exc.status >= 500
        if unready or not exc.status:
            return Check("pod", "default", False, f"a pod is refused: {exc}")
        # a quota, limit range or webhook of the user's own asks more of a bare pod: the cluster answers
        return Check("pod", "default", True, f"admission answers (the namespace's own policy: {exc})")
    return Check("pod", "default", True, "a pod is admitted")


def _rollout(addon: str, workload: dict[str, Any], api: KubeAPI) -> Check:
    """An add-on's DaemonSet or Deployment: rolled out when the controller saw its latest spec and every
    pod it wants is updated and ready."""
    target = object_ref(workload)
    try:
        current = api.get(api.object_path(workload))
    except KubeAPIError as exc:
        return Check("addon", target, False, f"{addon}: {exc}")
    status = current.get("status") or {}
    if workload["kind"] == "DaemonSet":
        wanted, ready = status.get("desiredNumberScheduled", 0), status.get("numberReady", 0)
        updated = status.get("updatedNumberScheduled", 0)
    else:
        wanted = (current.get("spec") or {}).get("replicas", 1)
        ready, updated = status.get("readyReplicas", 0), status.get("updatedReplicas", 0)
    seen = status.get("observedGeneration", 0) >= (current.get("metadata") or {}).get("generation", 1)
    ok = seen and ready >= wanted and updated >= wanted
    detail = f"{addon}: {ready}/{wanted} ready" + ("" if seen else ", not yet seen by its controller")
    return Check("addon", target, ok, detail)


def _node_checks(
    node: NodePlan,
    bundle: Mapping[str, CertKeyPair],
    host: HostConnection,
    beside: Executor,
    known: Mapping[str, str | None],
) -> list[Check]:
    """Every health check the node's containers have, fetched from the node itself, in start order. A
    container that answers is not enough: the files it reads must be the planned ones (a proxy whose
    nginx.conf lists old controlplanes answers too). The probes (run by `beside`) and the hashes (read here
    meanwhile) travel side by side on the host's one connection: a node costs one round of them, not one
    after another, and one hand-off to another thread fewer. Hashes in `known` are not asked again."""
    files = {f.path: f.sha256 for f in node.files}
    specs = [spec for spec in node.containers if spec.health is not None]
    probes = [beside.submit(probe, host, spec.health, bundle) for spec in specs if spec.health]
    paths = {p for spec in node.containers for p in spec.files}
    unknown = sorted(paths - known.keys())
    on_host = {**known, **(host.file_hashes(unknown) if unknown else {})}
    checks = []
    for spec, answer in zip(specs, probes, strict=True):
        ok, detail, _, busy = answer.result()
        stale = [p for p in spec.files if on_host.get(p) != files[p]]
        if stale:
            ok, detail, busy = False, f"{', '.join(stale)} not as planned (re-run `rke-py up`)", False
        checks.append(Check(spec.name, node.address, ok, detail, busy))
    if not all(c.ok for c in checks):
        checks[:0] = _docker_check(host)
    return checks


def _docker_check(host: HostConnection) -> list[Check]:
    """A failed check on a node whose Docker no longer answers: that is the cause, said first, not the
    components it took with it."""
    try:
        host.docker.info()
    except DockerError as exc:
        return [Check("docker", host.address, False, f"{exc}; start Docker there, then run again")]
    return []


def _check_leases(report, config: ClusterConfig, hostnames: Mapping[str, str], api: KubeAPI) -> None:
    """Exactly one holder per lease, on a controlplane node, renewed within its duration."""
    cp_names = {}
    for node in config.hosts("controlplane"):
        cp_names[node.name] = node.address
        if hostnames.get(node.address):
            cp_names[hostnames[node.address]] = node.address
    now = dt.datetime.now(dt.UTC)
    for name in LEASES:
        try:
            lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}")
        except KubeAPIError as exc:
            report.checks.append(Check("lease", name, False, str(exc)))
            continue
        spec = lease.get("spec", {})
        holder = spec.get("holderIdentity", "")
        host = holder.split("_", 1)[0]
        duration = int(spec.get("leaseDurationSeconds") or 15)
        renewed = _parse_time(spec.get("renewTime", ""))
        # a renewal stamped by a host clock a moment ahead of this one is as fresh as it gets, not "-0s ago"
        age = max(0.0, (now - renewed).total_seconds()) if renewed else float("inf")
        node_addr = cp_names.get(host, "")
        report.leases.append(
            Lease(name, holder, node_addr, round(age, 1), duration, spec.get("leaseTransitions", 0))
        )
        if not holder:
            report.checks.append(Check("lease", name, False, "no holder"))
        elif not node_addr:
            report.checks.append(Check("lease", name, False, f"holder {holder} is not a controlplane node"))
        elif age > duration:
            report.checks.append(
                Check("lease", name, False, f"not renewed for {age:.0f}s (duration {duration}s)")
            )
        else:
            report.checks.append(Check("lease", name, True, f"held by {node_addr}, renewed {age:.0f}s ago"))


def _check_nodes(report, config: ClusterConfig, api: KubeAPI) -> None:
    """Every configured node is registered, Ready, and carries the taints its roles imply."""
    try:
        items = {n["metadata"]["name"]: n for n in api.get("/api/v1/nodes").get("items", [])}
    except KubeAPIError as exc:
        report.checks.append(Check("node", "*", False, str(exc)))
        return
    for node in config.nodes:
        obj = items.get(node.name)
        if obj is None:
            report.checks.append(Check("node", node.name, False, "not registered"))
            continue
        ready = node_ready(obj)
        have = {(t.get("key"), t.get("effect")) for t in obj.get("spec", {}).get("taints") or []}
        missing = [f"{k}:{e}" for k, e in role_taints(node) if (k, e) not in have]
        ok = ready and not missing
        detail = "Ready" if ready else "NotReady"
        if missing:
            detail += f"; missing taints {', '.join(missing)}"
        report.checks.append(Check("node", node.name, ok, detail))


def _parse_time(text: str) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def require_ok(report: Report | None, skipped: Collection[str] = ()) -> None:
    """Raise VerifyError listing the failed checks (exit 6) but those about `skipped` hosts; None
    (verification skipped) passes."""
    failures = report.failures(skipped) if report is not None else []
    if failures or (report is not None and not report.checks):
        lines = [f"{c.name} {c.target}: {c.detail}" for c in failures]
        raise VerifyError("verification failed:\n  " + "\n  ".join(lines))
