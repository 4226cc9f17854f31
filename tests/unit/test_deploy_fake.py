"""`up`, `plan` and `remove` end to end on in-memory hosts: the chokepoint, rolling replace and its
rollback, the etcd plane's order, cluster objects, and a component added through the registry."""

from __future__ import annotations

import dataclasses
import json
import logging
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest import mock

import pytest

from rke_py.deploy import apply as apply_module
from rke_py.deploy import clusterstate
from rke_py.deploy import status as status_module
from rke_py.deploy import up as up_module
from rke_py.deploy.desired import Desired, prepare
from rke_py.deploy.remove import remove
from rke_py.deploy.seeds import NAMESPACES, ROOT_CA
from rke_py.deploy.session import Options
from rke_py.deploy.up import plan, up
from rke_py.errors import ApplyError, BusyError, ConnectError, HostError, PreflightError
from rke_py.hosts.base import DockerError
from rke_py.kube.api import KubeAPIError
from rke_py.pki.bundle import CA
from rke_py.plan.components import REGISTRY, Component, Placement
from rke_py.plan.model import ContainerSpec, HealthCheck
from rke_py.verify.checks import CLUSTER_CHECKS, Check, _cluster_checks, _node_checks, verify
from tests.unit.fakehost import FakeConnector, FakeHost, FakeKube, World

OPTIONS = Options(verify=False)
THREE_NODES = """
    nodes:
      - {address: 10.0.0.1, user: root, role: [etcd, controlplane, worker]}
      - {address: 10.0.0.2, user: root, role: [etcd, controlplane, worker]}
      - {address: 10.0.0.3, user: root, role: [etcd, controlplane, worker]}
"""

FIVE_NODES = THREE_NODES.replace("[etcd, controlplane, worker]", "[etcd, controlplane]") + (
    "      - {address: 10.0.0.4, user: root, role: [worker]}\n"
    "      - {address: 10.0.0.5, user: root, role: [worker]}\n"
)


def quick(registry: tuple[Component, ...]) -> tuple[Component, ...]:
    """The registry with health checks that give up after a few quick tries instead of RKE's minutes."""

    def fast(component: Component) -> Component:
        def health(node):
            check = component.health(node)
            return None if check is None else dataclasses.replace(check, retries=3, interval=0.01)

        return dataclasses.replace(component, health=health)

    return tuple(fast(c) for c in registry)


class Cluster:
    """A cluster.yml on disk, its fake hosts, and the commands run as the CLI runs them."""

    def __init__(self, tmp_path: Path, text: str = THREE_NODES, registry: tuple[Component, ...] = REGISTRY):
        self.path = tmp_path / "cluster.yml"
        self.registry = quick(registry)
        self.world = World()
        self.write(text)
        desired = self.desired()
        self.world.etcd_hosts = [n.address for n in desired.config.hosts("etcd")]
        for node in desired.config.nodes:
            FakeHost(self.world, node)

    def write(self, text: str) -> None:
        self.path.write_text(textwrap.dedent(text))

    def desired(self) -> Desired:
        return prepare(self.path, registry=self.registry)

    def host(self, address: str) -> FakeHost:
        return self.world.hosts[address]

    def up(self, options: Options = OPTIONS):
        return up(self.desired(), options, connector=FakeConnector(self.world))

    def plan(self):
        return plan(self.desired(), OPTIONS, connector=FakeConnector(self.world))

    def remove(self):
        return remove(self.desired(), OPTIONS, connector=FakeConnector(self.world))


def ids(cluster: Cluster) -> dict[str, dict[str, str]]:
    return {a: {c.name: c.id for c in h.docker.by_id.values()} for a, h in cluster.world.hosts.items()}


def test_up_builds_every_planned_container_and_a_second_up_changes_nothing(tmp_path):
    cluster = Cluster(tmp_path)
    first = cluster.up()
    desired = cluster.desired()
    for node in desired.plan.nodes:
        running = cluster.host(node.address).docker.names()
        assert running == {c.name: c.start for c in node.containers}
        assert set(cluster.host(node.address).files) == {f.path for f in node.files}
    assert first.changed > 0
    before = ids(cluster)
    events = len(cluster.world.events)
    again = cluster.up()
    assert again.changed == 0
    assert ids(cluster) == before
    assert cluster.world.events[events:] == []  # not one Docker call that changes anything
    assert cluster.plan().changed == 0


def test_a_new_etcd_cluster_starts_its_members_together(tmp_path):
    """A member alone has no quorum: waiting for each one's health in turn would never finish."""
    cluster = Cluster(tmp_path)
    cluster.up()
    etcd = [e for e in cluster.world.events if e.endswith("start etcd")]
    # in parallel, so in any order
    assert sorted(etcd) == ["10.0.0.1 start etcd", "10.0.0.2 start etcd", "10.0.0.3 start etcd"]
    first_control = next(i for i, e in enumerate(cluster.world.events) if "kube-apiserver" in e)
    last_etcd = max(i for i, e in enumerate(cluster.world.events) if e.endswith("start etcd"))
    assert last_etcd < first_control


def test_a_new_clusters_kubelets_start_beside_the_control_plane_and_kube_proxy_after_it(tmp_path):
    """Rancher's kubelet entrypoint sleeps 10 s before the kubelet starts, and the kubelet waits for an
    apiserver by itself: a new node's proxy and kubelet start once its images are there, not after the
    control plane. kube-proxy looks its Node up once at start, so it still waits for the control plane."""
    cluster = Cluster(tmp_path, FIVE_NODES)
    cluster.up()
    events = cluster.world.events
    last_apiserver = max(i for i, e in enumerate(events) if e.endswith("start kube-apiserver"))
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):  # the kubelet takes /opt/rke-tools from the sidekick
        sidekick, kubelet = (
            events.index(f"{address} {e}") for e in ("create service-sidekick", "start kubelet")
        )
        assert sidekick < kubelet < events.index(f"{address} start kube-apiserver")
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"):
        assert events.index(f"{address} start kube-proxy") > last_apiserver
    assert set(cluster.world.kube.nodes) == {f"10.0.0.{i}" for i in range(1, 6)}
    assert cluster.up().changed == 0


def test_only_hosts_whose_worker_plane_just_creates_containers_start_early(tmp_path):
    """A running kubelet is replaced by the rolling rules, after the control plane; an added worker's
    containers start early."""
    cluster = Cluster(tmp_path, FIVE_NODES)
    four = FIVE_NODES.replace("      - {address: 10.0.0.5, user: root, role: [worker]}\n", "")
    verbose = "    services: {kubelet: {extra_args: {v: '3'}}}\n"

    def phases(text: str) -> list[str]:
        cluster.write(text)
        seen: list[str] = []
        up(cluster.desired(), OPTIONS, lambda p: seen.append(p.key), FakeConnector(cluster.world))
        return seen

    assert "early" in phases(four)
    mark = len(cluster.world.events)
    assert "early" not in phases(four + verbose)
    assert sum(e.endswith("start kubelet") for e in cluster.world.events[mark:]) == 4
    mark = len(cluster.world.events)
    assert "early" in phases(FIVE_NODES + verbose)
    assert [e for e in cluster.world.events[mark:] if "kubelet" in e] == [
        "10.0.0.5 create kubelet",
        "10.0.0.5 start kubelet",
    ]
    assert set(cluster.world.kube.nodes) == {f"10.0.0.{i}" for i in range(1, 6)}


def test_a_changed_etcd_member_is_replaced_one_host_at_a_time(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.up()
    cluster.write(THREE_NODES + "    services: {etcd: {extra_args: {heartbeat-interval: '600'}}}\n")
    mark = len(cluster.world.events)
    result = cluster.up()
    assert [a.kind for a in result.host_actions["10.0.0.2"]] == ["replace"]
    etcd_events = [e for e in cluster.world.events[mark:] if e.split()[1] in ("stop", "start")]
    assert etcd_events == [
        f"10.0.0.{i} {verb} etcd" for i in (1, 2, 3) for verb in ("stop", "start")
    ]  # never two members down together


def test_a_replacement_that_fails_its_health_check_puts_the_old_container_back(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.up()
    old = ids(cluster)["10.0.0.1"]["kube-scheduler"]
    cluster.write(THREE_NODES + "    services: {scheduler: {extra_args: {v: '4'}}}\n")
    cluster.host("10.0.0.1").docker.broken.add("kube-scheduler")
    with pytest.raises(ApplyError) as failure:
        cluster.up()
    text = str(failure.value)
    assert text.startswith("10.0.0.1: kube-scheduler: health check failed")
    assert "kube-scheduler: the last line" in text  # the failing container's own log
    docker = cluster.host("10.0.0.1").docker
    assert docker.names()["kube-scheduler"] is True
    assert ids(cluster)["10.0.0.1"]["kube-scheduler"] == old
    assert "old-kube-scheduler" not in docker.names()


def test_rbac_lets_the_kubelets_register_and_is_left_alone_after(tmp_path):
    """Without the system:node binding no kubelet with RKE's certificate can register: a new cluster's
    kubelets, started beside the control plane, keep trying until `up` applies it."""
    cluster = Cluster(tmp_path)
    planned = cluster.plan()
    applied = [a for a in planned.cluster_actions if a.kind == "apply" and a.phase == "objects"]
    assert [(a.kind, a.target, a.reason) for a in applied] == [
        ("apply", "clusterrolebinding/system:node", "the cluster is not running yet"),
        ("apply", "clusterrole/proxy-clusterrole-kubeapiserver", "the cluster is not running yet"),
        (
            "apply",
            "clusterrolebinding/proxy-role-binding-kubernetes-master",
            "the cluster is not running yet",
        ),
    ]
    cluster.up()
    kube = cluster.world.kube
    assert set(kube.nodes) == {"10.0.0.1", "10.0.0.2", "10.0.0.3"}
    assert kube.waiting == []  # refused until the binding came, none left out
    rbac = ("system:node", "proxy-clusterrole-kubeapiserver", "proxy-role-binding-kubernetes-master")
    applies = [c for c in kube.calls if c.startswith("PATCH /apis/rbac") and c.split("?")[0].endswith(rbac)]
    assert len(applies) == 3
    kube.calls.clear()
    assert cluster.up().changed == 0
    assert not any(c.startswith("PATCH /apis/rbac") for c in kube.calls)
    kube.objects["/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:node"]["subjects"] = []
    [fix] = [a for a in cluster.plan().cluster_actions if a.phase == "objects"]
    assert (fix.target, fix.reason) == ("clusterrolebinding/system:node", "subjects differs")


def test_a_new_clusters_rbac_comes_as_soon_as_an_apiserver_answers(tmp_path, monkeypatch):
    """The kubelets started early register while the rest of the control plane starts, not after it: a
    scheduler that answers only once the Nodes are there still lets `up` through."""
    cluster = Cluster(tmp_path)
    kube = cluster.world.kube
    waited = apply_module.wait_healthy

    def scheduler_after_the_nodes(host, check, *args):
        if ":10259/" in check.url:
            deadline = time.monotonic() + 5
            while len(kube.nodes) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            if len(kube.nodes) < 3:
                return False, "no Nodes yet"
        return waited(host, check, *args)

    monkeypatch.setattr(apply_module, "wait_healthy", scheduler_after_the_nodes)
    cluster.up()
    assert set(kube.nodes) == {"10.0.0.1", "10.0.0.2", "10.0.0.3"}
    assert kube.waiting == []
    kube.calls.clear()
    assert cluster.up().changed == 0
    assert not any(c.startswith("PATCH /apis/rbac") for c in kube.calls)


def test_a_new_clusters_namespaces_take_a_pod_before_the_controller_manager_gets_to_them(tmp_path):
    """v1.28's controller manager may start its ServiceAccount and root-CA controllers after node IPAM's
    fixed 10 s: `up` makes their objects, as they would, and leaves the ones they made first alone."""
    cluster = Cluster(tmp_path)
    cluster.world.kube = FakeKube(controllers_done=False)
    seeds = [(a.target, a.reason) for a in cluster.plan().cluster_actions if a.kind == "seed"]
    assert seeds == [
        (f"{kind}/{ns}/{name}", "a new cluster: made before the controller manager gets to it")
        for ns in NAMESPACES
        for kind, name in (("serviceaccount", "default"), ("configmap", ROOT_CA))
    ]
    kube = cluster.world.kube
    theirs = {"metadata": {"name": ROOT_CA, "labels": {"made-by": "the controller manager"}}}
    kube.objects["/api/v1/namespaces/kube-public/configmaps/kube-root-ca.crt"] = theirs
    cluster.up()
    report = _cluster_checks(cluster.desired().config, {}, kube, [])
    usable = [c for c in report.checks if c.name in ("namespace", "pod")]
    assert len(usable) == 5 and all(c.ok for c in usable), usable
    ca = cluster.desired().bundle[CA].cert_pem  # what rke-py writes as kube-ca.pem
    made = kube.objects["/api/v1/namespaces/default/configmaps/kube-root-ca.crt"]
    assert made["data"] == {"ca.crt": ca}  # what the controller manager reads from --root-ca-file
    assert made["metadata"]["annotations"]["kubernetes.io/description"].startswith("Contains a CA bundle")
    assert kube.objects["/api/v1/namespaces/kube-public/configmaps/kube-root-ca.crt"] is theirs
    assert "POST /api/v1/namespaces/kube-node-lease/serviceaccounts?fieldManager=rke-py" in kube.calls
    assert not [a for a in cluster.plan().cluster_actions if a.kind == "seed"]  # a running cluster's own


def test_plan_lists_a_node_label_change_and_up_applies_it(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.up()
    assert (
        cluster.world.kube.nodes["10.0.0.2"]["metadata"]["labels"]["node-role.kubernetes.io/etcd"] == "true"
    )
    cluster.write(THREE_NODES.replace("worker]}\n", "worker], labels: {zone: b}}\n", 1))
    planned = cluster.plan()
    assert [(a.kind, a.target, a.reason) for a in planned.cluster_actions] == [
        ("sync-node", "node/10.0.0.1", "label zone=b")
    ]
    assert not any(planned.host_actions.values())
    assert "zone" not in cluster.world.kube.nodes["10.0.0.1"]["metadata"]["labels"]  # plan changed nothing
    cluster.up()  # verify off, as with --no-verify
    assert cluster.world.kube.nodes["10.0.0.1"]["metadata"]["labels"]["zone"] == "b"
    assert cluster.plan().changed == 0


def test_leftovers_go_and_rke_recurring_snapshots_are_taken_over(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.up()
    docker = cluster.host("10.0.0.3").docker
    docker.remove("etcd-rolling-snapshots")  # RKE's own instead of rke-py's, as on a host taken over
    docker.images.add("rke-tools")
    for name in ("cert-deployer", "someone-elses", "etcd-rolling-snapshots", "cluster-state-deployer"):
        docker.create(ContainerSpec(name, "rke-tools"))
        # RKE starts the last two without its name label
        labelled = name in ("cert-deployer", "someone-elses")
        docker._find(name).labels = {"io.rancher.rke.container.name": name} if labelled else {}
    docker.rename("kube-proxy", "old-kube-proxy")  # parked, and nothing replaced it: put back as it is
    result = cluster.up()
    assert [(a.kind, a.target, a.reason) for a in result.host_actions["10.0.0.3"]] == [
        ("remove", "cert-deployer", "RKE's one-shot helper, left over from an RKE run"),
        ("remove", "cluster-state-deployer", "RKE's one-shot helper, left over from an RKE run"),
        ("restore", "kube-proxy", "an interrupted replace left it parked and its replacement missing"),
        ("replace", "etcd-rolling-snapshots", "not started by rke-py; it runs otherwise"),
    ]
    assert {"etcd-rolling-snapshots", "someone-elses", "kube-proxy"} <= set(docker.names())
    removed = cluster.remove()
    assert "etcd-rolling-snapshots" in removed["10.0.0.3"]
    assert docker.names() == {"someone-elses": False}  # not rke-py's, not RKE's: never touched
    assert cluster.host("10.0.0.3").files == {}


def test_a_component_added_to_the_registry_is_observed_kept_and_removed(tmp_path):
    """Adding a container is one registry entry and its builder: observe, diff, `remove` follow."""

    def build(p: Placement) -> ContainerSpec:
        return ContainerSpec("node-exporter", "registry.example/node-exporter:1", command=("--port=9100",))

    extra = Component(
        "node-exporter",
        lambda node: "worker",
        lambda config, node: node.address != "10.0.0.3",
        build,
        ports=(9100,),
        health=lambda node: HealthCheck(url="http://localhost:9100/metrics"),
    )
    cluster = Cluster(tmp_path, registry=(*REGISTRY, extra))
    first = cluster.up()
    assert ("create", "node-exporter") in [(a.kind, a.target) for a in first.host_actions["10.0.0.1"]]
    assert "node-exporter" not in cluster.host("10.0.0.3").docker.names()
    exporter = ids(cluster)["10.0.0.1"]["node-exporter"]
    assert cluster.up().changed == 0  # observed by its name, left alone: no name conflict
    assert ids(cluster)["10.0.0.1"]["node-exporter"] == exporter
    removed = cluster.remove()
    assert "node-exporter" in removed["10.0.0.1"]
    assert all(h.docker.names() == {} for h in cluster.world.hosts.values())


def test_a_failure_shows_the_error_line_a_long_usage_text_would_bury(tmp_path, monkeypatch):
    """A real kube-apiserver refusing a flag prints the reason first and then pages of usage."""
    cluster = Cluster(tmp_path)
    cluster.up()
    cluster.write(THREE_NODES + "    services: {kube-api: {extra_args: {bogus: '1'}}}\n")
    docker = cluster.host("10.0.0.1").docker
    docker.broken.add("kube-apiserver")
    usage = ["Error: unknown flag: --bogus", "Usage:", *(f"      --flag-{i} string" for i in range(200))]
    monkeypatch.setattr(docker, "logs", lambda container, tail: usage[-tail:])
    with pytest.raises(ApplyError) as failure:
        cluster.up()
    shown = str(failure.value).split("last log lines:\n")[1].splitlines()
    assert [line.strip() for line in shown[:2]] == ["Error: unknown flag: --bogus", "..."]
    assert shown[-1].strip() == "--flag-199 string"


def test_a_host_whose_user_is_not_root_reads_files_and_cleans_up_the_root_way_through_its_seam(tmp_path):
    """As root, one shell command reads the file hashes and rm -rf cleans up; otherwise both go through the
    host's root seam (containers on a real host), and up, a no-op up and remove behave the same."""
    cluster = Cluster(tmp_path)
    host = cluster.host("10.0.0.3")
    host.root = False
    shell: list[str] = []
    as_root: list[str] = []
    run = host.run
    host.run = lambda cmd, **kw: (shell.append(cmd), run(cmd, **kw))[1]  # type: ignore[method-assign]
    host.run_as_root = lambda script: (as_root.append(script), run(script))[1]  # type: ignore[method-assign]
    cluster.up()
    assert host.files and not any("sha256sum" in cmd for cmd in shell)
    assert cluster.up().changed == 0  # the hashes read through the seam match what was written
    cluster.remove()
    assert host.files == {} and any("rm -rf" in script for script in as_root)
    assert not any("rm -rf" in cmd for cmd in shell)


def test_rkes_finished_add_on_jobs_are_cleaned_up_and_running_ones_left(tmp_path):
    """A cluster RKE built has its add-on Jobs in kube-system; rke-py applies the add-ons itself."""
    cluster = Cluster(tmp_path)
    cluster.up()
    kube = cluster.world.kube
    jobs = "/apis/batch/v1/namespaces/kube-system/jobs"
    for name, status in (
        ("rke-network-plugin-deploy-job", {"succeeded": 1}),
        ("rke-user-addon-deploy-job", {}),
    ):
        kube.objects[f"{jobs}/{name}"] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "kube-system"},
            "status": status,
        }
    planned = [(a.kind, a.target, a.reason) for a in cluster.plan().cluster_actions if a.phase == "addons"]
    assert planned == [
        ("delete", "job/kube-system/rke-network-plugin-deploy-job", "RKE's finished add-on Job")
    ]
    cluster.up()
    assert f"{jobs}/rke-network-plugin-deploy-job" not in kube.objects
    assert f"{jobs}/rke-user-addon-deploy-job" in kube.objects  # not finished: left for its owner


def _order(events: list[str], wanted: tuple[str, ...]) -> list[str]:
    return [e for e in events if e.endswith(wanted) or e.startswith("kube ")]


def test_a_control_plane_change_replaces_one_host_at_a_time_and_plan_shows_the_batches(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.up()
    cluster.write(THREE_NODES + "    services: {kube-api: {extra_args: {v: '3'}}}\n")
    planned = cluster.plan()
    reasons = {a: [x.reason for x in acts if x.kind == "replace"] for a, acts in planned.host_actions.items()}
    assert reasons == {f"10.0.0.{i}": [f"spec changed; batch {i} of 3"] for i in (1, 2, 3)}
    cluster.world.events.clear()
    cluster.up()
    apiserver = [
        e for e in cluster.world.events if e.endswith(("stop kube-apiserver", "start kube-apiserver"))
    ]
    assert apiserver == [f"10.0.0.{i} {what} kube-apiserver" for i in (1, 2, 3) for what in ("stop", "start")]


def test_workers_are_cordoned_drained_changed_and_uncordoned_in_batches(tmp_path):
    five = FIVE_NODES
    cluster = Cluster(tmp_path, five)
    cluster.up()
    strategy = "    upgrade_strategy: {max_unavailable_worker: '50%', drain: true}\n"
    cluster.write(five + strategy + "    services: {kubeproxy: {extra_args: {v: '3'}}}\n")
    planned = [(a.kind, a.target) for a in cluster.plan().cluster_actions if a.phase == "worker"]
    workers = [("cordon", "node/10.0.0.4"), ("drain", "node/10.0.0.4"), ("uncordon", "node/10.0.0.4")]
    assert planned[-6:] == workers + [(k, t.replace(".4", ".5")) for k, t in workers]
    cluster.world.events.clear()
    cluster.up()
    order = _order(cluster.world.events, ("stop kube-proxy", "start kube-proxy"))
    assert order[-8:] == [
        "kube cordon 10.0.0.4",
        "10.0.0.4 stop kube-proxy",
        "10.0.0.4 start kube-proxy",
        "kube uncordon 10.0.0.4",
        "kube cordon 10.0.0.5",
        "10.0.0.5 stop kube-proxy",
        "10.0.0.5 start kube-proxy",
        "kube uncordon 10.0.0.5",
    ]
    assert not any(n["spec"].get("unschedulable") for n in cluster.world.kube.nodes.values())


def test_a_container_parked_by_a_killed_replace_is_put_back_then_replaced(tmp_path):
    """`up` killed after parking the old kube-apiserver and before starting the new one."""
    cluster = Cluster(tmp_path)
    cluster.up()
    cluster.write(THREE_NODES + "    services: {kube-api: {extra_args: {v: '3'}}}\n")
    docker = cluster.host("10.0.0.1").docker
    old = next(c for c in docker.by_id.values() if c.name == "kube-apiserver")
    docker.stop(old.id)
    docker.rename(old.id, "old-kube-apiserver")
    planned = cluster.plan().host_actions["10.0.0.1"]
    assert [(a.kind, a.target) for a in planned if "kube-apiserver" in a.target] == [
        ("restore", "kube-apiserver"),
        ("replace", "kube-apiserver"),
    ]
    cluster.world.events.clear()
    cluster.up()
    first = [e for e in cluster.world.events if e.startswith("10.0.0.1")][:2]
    assert first == ["10.0.0.1 rename old-kube-apiserver kube-apiserver", "10.0.0.1 start kube-apiserver"]
    names = [c.name for c in docker.by_id.values()]
    assert names.count("kube-apiserver") == 1 and "old-kube-apiserver" not in names
    assert cluster.plan().host_actions["10.0.0.1"] == []


def test_a_parked_container_whose_replacement_runs_is_removed(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.up()
    docker = cluster.host("10.0.0.2").docker
    spec = next(c.spec for c in docker.by_id.values() if c.name == "kube-scheduler")
    parked = docker.create(dataclasses.replace(spec, name="old-kube-scheduler"))
    planned = cluster.plan().host_actions["10.0.0.2"]
    assert [(a.kind, a.target, a.reason) for a in planned] == [
        ("remove", "old-kube-scheduler", "left by an interrupted replace")
    ]
    cluster.up()
    assert parked not in docker.by_id


def test_proxies_take_each_apiserver_out_of_rotation_while_it_is_replaced(tmp_path):
    """A new apiserver accepts connections before its authorizers synced: no proxy may send it any."""
    five = FIVE_NODES.replace("      - {address: 10.0.0.5, user: root, role: [worker]}\n", "")
    cluster = Cluster(tmp_path, five)
    cluster.up()
    cluster.write(five + "    services: {kube-api: {extra_args: {v: '3'}}}\n")
    planned = cluster.plan().host_actions["10.0.0.4"]
    assert [(a.kind, a.reason) for a in planned] == [
        ("rotate-proxy", f"10.0.0.{i} {what}") for i in (1, 2, 3) for what in ("out of rotation", "back")
    ]
    conf = "/etc/kubernetes/nginx-proxy/nginx.conf"
    seen = []
    worker = cluster.host("10.0.0.4")
    write = worker.write_files

    def recording(files):
        for f in files:
            if f.path == conf:
                lines = f.content.decode().splitlines()
                seen.append([line.split()[1] for line in lines if line.strip().endswith("down;")])
        write(files)

    worker.write_files = recording
    cluster.world.events.clear()
    cluster.up()
    assert seen == [["10.0.0.1:6443"], [], ["10.0.0.2:6443"], [], ["10.0.0.3:6443"], []]
    order = [
        "reload" if e.startswith("10.0.0.4 exec nginx-proxy") else e
        for e in cluster.world.events
        if "nginx" in e or e.endswith("start kube-apiserver")
    ]
    assert order[:3] == ["reload", "10.0.0.1 start kube-apiserver", "reload"]
    reload = next(e for e in cluster.world.events if e.startswith("10.0.0.4 exec nginx-proxy"))
    assert reload.endswith(" sh nginx -c /etc/nginx/rke-py/nginx.conf -s reload"), reload
    assert cluster.plan().host_actions["10.0.0.4"] == []  # the proxy's file is the planned one again


def test_unreachable_workers_within_max_unavailable_are_skipped_and_beyond_it_nothing_changes(tmp_path):
    five = FIVE_NODES
    cluster = Cluster(tmp_path, five)
    cluster.up()
    cluster.write(five + "    services: {kubeproxy: {extra_args: {v: '3'}}}\n")
    cluster.world.down = {"10.0.0.5"}  # 10% of two workers: one may be missing
    result = cluster.up()
    assert [n.address for n in result.skipped] == ["10.0.0.5"]
    assert "10.0.0.5" not in result.host_actions
    assert ("replace", "kube-proxy") in [(a.kind, a.target) for a in result.host_actions["10.0.0.4"]]
    cluster.world.down = {"10.0.0.4", "10.0.0.5"}
    cluster.write(five + "    services: {kubeproxy: {extra_args: {v: '4'}}}\n")
    cluster.world.events.clear()
    with pytest.raises(
        ConnectError, match=r"2 worker host\(s\) cannot be reached, more than .* allows \(1\)"
    ):
        cluster.up()
    assert cluster.world.events == []  # stopped before changing anything
    cluster.world.down = {"10.0.0.1"}  # etcd and controlplane hosts keep the strict rule
    with pytest.raises(ConnectError):
        cluster.up()


def test_not_ready_workers_go_first_and_count_against_max_unavailable(tmp_path):
    five = FIVE_NODES
    cluster = Cluster(tmp_path, five)
    cluster.up()
    not_ready = {"conditions": [{"type": "Ready", "status": "False"}]}
    cluster.world.kube.nodes["10.0.0.5"]["status"] = not_ready  # 10% of two workers: one may be down
    cluster.write(five + "    services: {kubeproxy: {extra_args: {v: '3'}}}\n")
    cluster.world.events.clear()
    cluster.up()
    order = _order(cluster.world.events, ("stop kube-proxy", "start kube-proxy"))
    assert order[-6:] == [
        "10.0.0.5 stop kube-proxy",  # NotReady already: changed first, neither cordoned nor waited for
        "10.0.0.5 start kube-proxy",
        "kube cordon 10.0.0.4",
        "10.0.0.4 stop kube-proxy",
        "10.0.0.4 start kube-proxy",
        "kube uncordon 10.0.0.4",
    ]
    cluster.world.kube.nodes["10.0.0.4"]["status"] = not_ready
    cluster.write(five + "    services: {kubeproxy: {extra_args: {v: '4'}}}\n")
    cluster.world.events.clear()
    with pytest.raises(
        PreflightError, match=r"10\.0\.0\.4: preflight: Node Ready: its Node is NotReady; 2 worker"
    ):
        cluster.up()
    assert cluster.world.events == []  # stopped before changing anything


def test_the_state_in_the_cluster_is_compact_and_one_too_large_for_a_secret_is_left_out(
    tmp_path, monkeypatch, caplog
):
    """A Secret holds at most 1 MiB: compact JSON (as RKE writes it) keeps a thousand nodes' state under it;
    past that the apiserver would refuse it and fail `up`, so it is left out with a warning instead."""
    cluster = Cluster(tmp_path)
    cluster.up()
    path = f"/api/v1/namespaces/{clusterstate.NAMESPACE}/secrets/{clusterstate.NAME}"
    stored = clusterstate.state_from_secret(cluster.world.kube.objects[path])
    assert stored is not None and stored.startswith('{"desiredState":{"rkeConfig":{')  # no indentation
    assert json.loads(stored) == json.loads((tmp_path / "cluster.rkestate").read_text())
    monkeypatch.setattr(clusterstate, "LIMIT", len(stored) - 1)
    cluster.write(THREE_NODES + "    services: {kubelet: {extra_args: {v: '2'}}}\n")
    cluster.up()
    assert clusterstate.state_from_secret(cluster.world.kube.objects[path]) == stored  # the earlier copy
    assert "larger than a Secret holds" in caplog.text


def test_a_cluster_rke_built_is_taken_over_keeping_every_container_that_runs_what_rke_py_would(tmp_path):
    """Containers without rke-py's labels (RKE's) stay when they run what rke-py plans; one that runs
    otherwise is replaced, and only it."""
    cluster = Cluster(tmp_path)
    cluster.up()
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        for c in cluster.host(address).docker.by_id.values():
            c.labels = {"io.rancher.rke.container.name": c.name}  # as RKE labels its containers
    assert cluster.plan().host_actions == {f"10.0.0.{i}": [] for i in (1, 2, 3)}
    proxy = next(c for c in cluster.host("10.0.0.2").docker.by_id.values() if c.name == "kube-proxy")
    proxy.spec = dataclasses.replace(proxy.spec, env=(*proxy.spec.env, "RKE_ONLY=1"))
    cluster.world.events.clear()
    done = cluster.up()
    assert [(a.kind, a.target) for a in done.host_actions["10.0.0.2"]] == [("replace", "kube-proxy")]
    assert [e for e in cluster.world.events if e.split()[1] in ("stop", "start")] == [
        "10.0.0.2 stop kube-proxy",
        "10.0.0.2 start kube-proxy",
    ]
    assert cluster.up().changed == 0


def test_rkes_proxy_is_kept_and_takes_apiservers_out_of_rotation_through_its_own_conf(tmp_path):
    """On a cluster RKE built, the workers' proxies are RKE's: kept (replacing one cuts its node off the
    API), and rotated by writing the configuration inside them, where RKE's nginx reads it."""
    five = FIVE_NODES.replace("      - {address: 10.0.0.5, user: root, role: [worker]}\n", "")
    cluster = Cluster(tmp_path, five)
    cluster.up()
    proxy = next(c for c in cluster.host("10.0.0.4").docker.by_id.values() if c.name == "nginx-proxy")
    proxy.labels = {"io.rancher.rke.container.name": "nginx-proxy"}
    proxy.spec = dataclasses.replace(
        proxy.spec, entrypoint=("nginx-proxy",), command=proxy.spec.env, binds=(), files=()
    )
    assert cluster.plan().host_actions["10.0.0.4"] == []
    cluster.write(five + "    services: {kube-api: {extra_args: {v: '3'}}}\n")
    cluster.world.events.clear()
    cluster.up()
    reloads = [e for e in cluster.world.events if e.startswith("10.0.0.4 exec nginx-proxy")]
    assert len(reloads) == 6, reloads  # out of rotation and back, for each of the three apiservers
    assert all("> /etc/nginx/nginx.conf || exit; shift" in e for e in reloads), reloads[0]
    assert all(e.endswith(" nginx -s reload") for e in reloads), reloads[0]
    assert "server 10.0.0.1:6443 max_fails=1 fail_timeout=2s down;" in reloads[0]
    assert "listen 6443;" in reloads[0] and "pid " not in reloads[0]  # RKE's nginx keeps its own pid file
    assert proxy.id in cluster.host("10.0.0.4").docker.by_id  # never replaced


def test_a_hosts_images_are_pulled_side_by_side_and_a_failed_pull_names_its_image(tmp_path):
    """A fresh host waits on the registry for each image: one after another, the waits add up."""
    cluster = Cluster(tmp_path)
    docker = cluster.host("10.0.0.1").docker
    pulled, at_once, lock = docker.pull, [0, 0], threading.Lock()

    def slow_pull(image, auth):
        with lock:
            at_once[0] += 1
            at_once[1] = max(at_once)
        time.sleep(0.2)
        with lock:
            at_once[0] -= 1
        if image.endswith("broken"):
            raise DockerError("manifest unknown")
        pulled(image, auth)

    docker.pull = slow_pull
    cluster.up()
    assert at_once[1] > 1, "pulled one after another"
    node = cluster.desired().plan.node("10.0.0.1")
    assert {image for image, _ in docker.pulls} == {c.image for c in node.containers} | set(node.images)
    cluster.write(THREE_NODES + "    system_images: {kubernetes_services_sidecar: reg/broken}\n")
    docker.images.clear()
    with pytest.raises(ApplyError, match=r"10\.0\.0\.1: images: pull-image reg/broken: manifest unknown"):
        cluster.up()


def test_each_plane_waits_only_for_the_images_its_containers_run(tmp_path):
    """etcd starts while the control plane's image is still arriving (a new cluster's hyperkube is the
    long pull), and the control plane waits for it."""
    cluster = Cluster(tmp_path)
    docker = cluster.host("10.0.0.1").docker
    hyperkube = cluster.desired().plan.node("10.0.0.1").container("kube-apiserver").image
    pulled, events = docker.pull, cluster.world.events
    arrived = threading.Event()

    def slow_pull(image, auth):
        if image == hyperkube:
            arrived.wait(10)  # until etcd runs on every etcd host, or 10 s
            events.append(f"10.0.0.1 pulled {image}")
        pulled(image, auth)

    def starting(started):
        def start(container: str) -> None:
            started(container)
            if sum(e.endswith(" start etcd") for e in events) == 3:
                arrived.set()

        return start

    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        host = cluster.host(address).docker
        host.start = starting(host.start)  # type: ignore[method-assign]
    docker.pull = slow_pull
    cluster.up()
    mine = [e for e in events if e.startswith("10.0.0.1 ")]
    assert arrived.is_set(), "etcd waited for the control plane's image"
    assert mine.index("10.0.0.1 start etcd") < mine.index(f"10.0.0.1 pulled {hyperkube}")
    assert mine.index(f"10.0.0.1 pulled {hyperkube}") < mine.index("10.0.0.1 create kube-apiserver")


def test_workers_pull_while_the_etcd_and_control_plane_hosts_still_pull(tmp_path):
    """A worker waiting for the other hosts' pulls would leave its own network and cores idle meanwhile;
    with one host at a time, the etcd and control plane hosts still go first."""
    (tmp_path / "one").mkdir()
    Cluster(tmp_path / "one", FIVE_NODES).up(dataclasses.replace(OPTIONS, concurrency=1))  # no deadlock
    cluster = Cluster(tmp_path, FIVE_NODES)
    order: list[str] = []
    lock = threading.Lock()
    for address, host in cluster.world.hosts.items():

        def pull(image, auth, pulled=host.docker.pull, address=address):
            with lock:
                order.append(f"{address} start")
            time.sleep(0.05)
            pulled(image, auth)
            with lock:
                order.append(f"{address} done")

        host.docker.pull = pull  # type: ignore[method-assign]
    cluster.up()
    leaders = [i for i, e in enumerate(order) if e in ("10.0.0.1 done", "10.0.0.2 done", "10.0.0.3 done")]
    workers = [i for i, e in enumerate(order) if e in ("10.0.0.4 start", "10.0.0.5 start")]
    assert workers and min(workers) < max(leaders), order


def test_components_that_need_only_the_one_before_them_start_together(tmp_path):
    """The scheduler does not wait for the controller manager, nor kube-proxy for the kubelet: on a new
    cluster each wait is seconds. The apiserver is still healthy before either of the first two starts."""
    cluster = Cluster(tmp_path)
    host = cluster.host("10.0.0.1")
    answered, started = host.http_get, host.docker.start
    # each slow one answers only once its neighbour started, or after 5 s
    neighbours = {"kube-controller-manager": "kube-scheduler", "kubelet": "kube-proxy"}
    running = {name: threading.Event() for name in neighbours.values()}
    seen_beside: dict[str, bool] = {}

    def start(container: str) -> None:
        started(container)
        name = host.docker.by_id[container].name if container in host.docker.by_id else container
        if name in running:
            running[name].set()

    def http_get(url: str, *, timeout: float = 5) -> tuple[int, bytes]:
        name = next(c.name for c in host.docker.by_id.values() if c.spec.health and c.spec.health.url == url)
        if name in neighbours and name not in seen_beside:
            seen_beside[name] = running[neighbours[name]].wait(5)
        status, body = answered(url, timeout=timeout)
        if name == "kube-apiserver" and status == 200:
            seen_beside.setdefault(
                "controller manager after a healthy apiserver",
                "kube-controller-manager" not in host.docker.names(),
            )
        return status, body

    host.http_get = http_get  # type: ignore[method-assign]
    host.docker.start = start  # type: ignore[method-assign]
    cluster.up()
    assert seen_beside == {
        "kube-controller-manager": True,
        "kubelet": True,
        "controller manager after a healthy apiserver": True,
    }


def test_a_node_whose_docker_stopped_names_docker_before_the_components_it_took_along(tmp_path, monkeypatch):
    cluster = Cluster(tmp_path)
    cluster.up()
    stopped = cluster.host("10.0.0.2")
    for container in stopped.docker.by_id.values():
        container.running = False
    gone = "docker info: sshd could not open a channel to Docker (Connect failed): has it stopped?"
    monkeypatch.setattr(stopped.docker, "info", lambda: (_ for _ in ()).throw(DockerError(gone)))
    desired = cluster.desired()
    with ThreadPoolExecutor(max_workers=8) as beside:
        checks = {
            a: _node_checks(desired.plan.node(a), desired.bundle, cluster.host(a), beside, {})
            for a in ("10.0.0.1", "10.0.0.2")
        }
    first, *rest = checks["10.0.0.2"]
    assert first == Check("docker", "10.0.0.2", False, f"{gone}; start Docker there, then run again")
    assert rest and not any(c.ok for c in rest)
    assert all(c.ok and c.name != "docker" for c in checks["10.0.0.1"])


@pytest.mark.parametrize(("stalls", "api"), [(0, True), (2, True), (2, False)])
def test_status_asks_a_busy_apiserver_again_and_reports_a_stopped_one_at_once(
    tmp_path, caplog, monkeypatch, stalls, api
):
    """A slow host's apiserver that takes the connection and says nothing for a while, while the API
    answers, is not a failure of `status`; one that refuses it (stopped) is, without a wait, and so is one
    of a cluster whose API answers nothing."""
    cluster = Cluster(tmp_path)
    cluster.up()
    if not api:
        refused = KubeAPIError("x509: certificate has expired")
        monkeypatch.setattr(cluster.world.kube, "request", mock.Mock(side_effect=refused))
    host = cluster.host("10.0.0.1")
    answered, silent = host.http_get, iter(range(stalls))

    def busy(url: str, *, timeout: float = 5):
        if ":6443/" in url and next(silent, None) is not None:
            raise BusyError(host.address, "http", f"GET {url} from the node failed: no answer within 5 s")
        return answered(url, timeout=timeout)

    host.http_get = busy  # type: ignore[method-assign]
    apiserver = next(c for c in host.docker.by_id.values() if c.name == "kube-apiserver")
    apiserver.running = bool(stalls)  # with none, it is stopped: nothing listens
    monkeypatch.setattr(status_module, "BUSY_PAUSE", 0)
    monkeypatch.setattr(status_module, "LEASE_GRACE", 0.5)  # the fake API holds no leases: they never renew
    caplog.set_level(logging.INFO)
    started = time.monotonic()
    report = status_module.status(cluster.desired(), Options(), FakeConnector(cluster.world))
    row = next(c for c in report.checks if (c.name, c.target) == ("kube-apiserver", "10.0.0.1"))
    asked_again = caplog.text.count("no answer in time from kube-apiserver 10.0.0.1; asking again")
    # leases its holders could not renew while the apiserver stalled are waited for, a lease term at most
    waited_for_leases = "leader leases not renewed while the apiserver stalled" in caplog.text
    assert waited_for_leases == bool(stalls and api)
    if stalls and api:
        assert row.ok and asked_again == stalls
    elif stalls:
        assert not row.ok and asked_again == 0
    else:
        assert not row.ok and "connection refused" in row.detail
        assert asked_again == 0 and time.monotonic() - started < 5
    assert "busy" not in report.to_dict()["checks"][0]  # not part of the JSON document


def test_verify_again_probes_only_the_nodes_that_failed_and_keeps_the_rows_of_the_others(tmp_path):
    """`up` waiting for the cluster to settle: each round asks the API again, but a node whose probes all
    passed is not probed again (at a thousand nodes a round of probes takes seconds)."""
    cluster = Cluster(tmp_path)
    cluster.up()
    desired = cluster.desired()
    hosts = {a: cluster.host(a) for a in ("10.0.0.1", "10.0.0.2", "10.0.0.3")}
    probed: list[str] = []
    for address, host in hosts.items():
        answered = host.http_get

        def counted(url: str, *, timeout: float = 5, address=address, answered=answered):
            probed.append(address)
            return answered(url, timeout=timeout)

        host.http_get = counted  # type: ignore[method-assign]
    kubelet = next(c for c in hosts["10.0.0.2"].docker.by_id.values() if c.name == "kubelet")
    kubelet.healthy = False

    def check(again=None):
        args = (
            desired.config,
            desired.plan,
            desired.bundle,
            hosts,
            {a: a for a in hosts},
            cluster.world.kube,
        )
        return verify(*args, [], 4, again)

    def probes(report) -> list[tuple[str, str, bool]]:  # the fake API holds no leases: those rows fail
        return [(c.name, c.target, c.ok) for c in report.checks if c.name not in CLUSTER_CHECKS]

    first = check()
    assert [(name, target) for name, target, ok in probes(first) if not ok] == [("kubelet", "10.0.0.2")]
    kubelet.healthy = True
    probed.clear()
    second = check(again=first)
    assert set(probed) == {"10.0.0.2"}
    assert probes(second) == [(name, target, True) for name, target, _ in probes(first)]


def test_verify_reads_only_the_file_hashes_the_run_does_not_know(tmp_path):
    """A component answering is not enough: a file it reads that is not as planned fails its check. What
    the run observed or wrote is known, so verify asks the host only about the rest."""
    cluster = Cluster(tmp_path)
    cluster.up()
    desired = cluster.desired()
    host = cluster.host("10.0.0.2")
    node = desired.plan.node("10.0.0.2")
    kubelet = next(spec for spec in node.containers if spec.name == "kubelet")
    planned = {f.path: f.sha256 for f in node.files}
    tampered = kubelet.files[0]
    host.files[tampered] = ("0" * 64, host.files[tampered][1])
    asked: list[list[str]] = []
    answered = host.file_hashes

    def counted(paths: list[str]) -> dict[str, str | None]:
        asked.append(paths)
        return answered(paths)

    host.file_hashes = counted  # type: ignore[method-assign]

    def kubelet_check(known: dict[str, str | None]):
        args = (desired.config, desired.plan, desired.bundle, {"10.0.0.2": host}, {}, cluster.world.kube)
        report = verify(*args, [], 4, known={"10.0.0.2": known})
        return next(c for c in report.checks if c.name == "kubelet")

    read = kubelet_check({})
    assert not read.ok and read.detail == f"{tampered} not as planned (re-run `rke-py up`)"
    assert tampered in asked[0]
    asked.clear()
    assert kubelet_check(planned).ok  # as the run wrote it: nothing to ask
    assert asked == []


@pytest.mark.parametrize(("api_timeout", "waited"), [(0, 45), (120, 120)])
def test_up_waits_for_the_cluster_to_settle_as_long_as_api_calls_are_retried(
    tmp_path, monkeypatch, api_timeout, waited
):
    """On a slow host the controller manager takes minutes to lead and give the namespaces their accounts;
    `--api-timeout` raises how long `up` waits for that, as for any API call (the fake API holds no leases,
    so here the cluster never settles)."""
    cluster = Cluster(tmp_path)
    cluster.up()
    clock = [0.0]
    monkeypatch.setattr(up_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(up_module.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    result = cluster.up(Options(api_timeout=api_timeout))
    assert "lease" in {c.name for c in result.report.failures()}
    assert waited <= clock[0] < waited + 1


def test_a_step_failing_where_docker_stopped_says_docker_first_and_what_failed_after(tmp_path, monkeypatch):
    cluster = Cluster(tmp_path)
    cluster.up()
    docker = cluster.host("10.0.0.2").docker
    gone = "docker info: sshd could not open a channel to Docker (Connect failed): has it stopped?"
    answered, stopped = docker.info, threading.Event()

    def info() -> dict:
        if stopped.is_set():
            raise DockerError(gone, stopped=True)
        return answered()

    def start(container: str) -> None:  # Docker going down as the kubelet is started
        stopped.set()
        raise DockerError(f"start {container}: 500")

    monkeypatch.setattr(docker, "info", info)
    monkeypatch.setattr(docker, "start", start)
    cluster.write(THREE_NODES + "    services: {kubelet: {extra_args: {v: '3'}}}\n")
    with pytest.raises(HostError) as failure:
        cluster.up()
    said = str(failure.value)
    assert said.startswith("10.0.0.2: ") and failure.value.exit_status == 5
    cause, _, what = said.partition("; what failed: ")
    assert cause.endswith(
        "Docker stopped answering (sshd could not open a channel to Docker (Connect failed): has it "
        "stopped?): start it, then run again"
    )
    assert what.startswith("start ") and what.endswith(": 500"), said


def test_a_step_failing_on_a_host_that_cannot_be_reached_again_keeps_its_own_error(tmp_path, monkeypatch):
    """A host restarting as a step fails there: asking its Docker whether it stopped cannot even log in
    again, which leaves the step's error as it was, and prints no thread's traceback."""
    cluster = Cluster(tmp_path)
    cluster.up()
    docker = cluster.host("10.0.0.2").docker
    restarting = ConnectError("10.0.0.2", "ssh", "SSH handshake on port 22 failed: no SSH banner within 10s")
    monkeypatch.setattr(docker, "info", lambda: (_ for _ in ()).throw(restarting))
    broke = DockerError("start kubelet: the connection to Docker broke before it answered")
    monkeypatch.setattr(docker, "start", lambda container: (_ for _ in ()).throw(broke))
    uncaught: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: uncaught.append(args.exc_value))
    cluster.write(THREE_NODES + "    services: {kubelet: {extra_args: {v: '3'}}}\n")
    with pytest.raises(HostError) as failure:
        cluster.up()
    assert str(failure.value).endswith("start kubelet: the connection to Docker broke before it answered")
    assert "Docker stopped" not in str(failure.value)
    assert uncaught == []


def test_a_host_whose_only_change_is_a_file_it_cannot_write_fails_the_run_before_the_state_says_done(
    tmp_path, monkeypatch
):
    """No plane waits for such a host: the run still waits for it, and fails naming it (a full disk)."""
    cluster = Cluster(tmp_path)
    cluster.up()
    state = (tmp_path / "cluster.rkestate").read_text()
    host = cluster.host("10.0.0.3")
    del host.files["/etc/kubernetes/ssl/kube-ca.pem"]
    full = HostError("10.0.0.3", "write", "cannot write /etc/kubernetes/ssl/kube-ca.pem: no space left")
    monkeypatch.setattr(host, "write_files", lambda files: (_ for _ in ()).throw(full))
    with pytest.raises(HostError) as failure:
        cluster.up()
    assert failure.value is full and failure.value.exit_status == 5
    assert (tmp_path / "cluster.rkestate").read_text() == state  # not marked as matching the hosts
