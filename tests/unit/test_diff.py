"""The diff decides what `up` changes and what `plan` prints: a wrong answer here restarts a cluster."""

import dataclasses

from rke_py.deploy.diff import diff_host
from rke_py.deploy.facts import HostFacts, ObservedContainer
from rke_py.plan.model import ContainerSpec, FileSpec, NodePlan, Placed

CONF = FileSpec("/etc/kubernetes/nginx-proxy/nginx.conf", b"upstream a;", 0o644)
PROXY = ContainerSpec("nginx-proxy", "reg/nginx:1", files=(CONF.path,), files_digest="d1")
KUBELET = ContainerSpec("kubelet", "reg/kube:1", privileged=True)
SIDEKICK = ContainerSpec("service-sidekick", "reg/tools:1", start=False, restart_policy="")


def worker_plan() -> NodePlan:
    placed = [Placed("worker", spec) for spec in (PROXY, SIDEKICK, KUBELET)]
    return NodePlan("10.0.0.5", "w1", ("worker",), files=[CONF], placed=placed)


def matching_facts(plan: NodePlan) -> HostFacts:
    facts = HostFacts("10.0.0.5", images={"reg/nginx:1", "reg/kube:1", "reg/tools:1"})
    facts.file_hashes = {f.path: f.sha256 for f in plan.files}
    for spec in plan.containers:
        facts.containers[spec.name] = ObservedContainer(
            spec.name, "id-" + spec.name, spec.image, spec.start, spec.spec_hash()
        )
    return facts


def kinds(actions):
    return [(a.kind, a.target) for a in actions]


def test_a_host_that_matches_the_plan_gets_no_action():
    plan = worker_plan()
    assert diff_host(plan, matching_facts(plan)) == []


def test_an_empty_host_gets_files_then_images_then_containers_in_plane_order():
    plan = worker_plan()
    actions = diff_host(plan, HostFacts("10.0.0.5"))
    assert kinds(actions) == [
        ("write-file", CONF.path),
        ("pull-image", "reg/nginx:1"),
        ("pull-image", "reg/tools:1"),
        ("pull-image", "reg/kube:1"),
        ("create", "nginx-proxy"),
        ("create", "service-sidekick"),
        ("create", "kubelet"),
    ]


def test_a_changed_spec_replaces_only_that_container():
    plan = worker_plan()
    facts = matching_facts(plan)
    plan.placed[2] = Placed("worker", ContainerSpec("kubelet", "reg/kube:1", privileged=True, env=("X=1",)))
    assert kinds(diff_host(plan, facts)) == [("replace", "kubelet")]


def test_a_stopped_container_is_started_but_the_never_started_sidekick_is_left():
    plan = worker_plan()
    facts = matching_facts(plan)
    facts.containers["kubelet"] = ObservedContainer("kubelet", "k", "reg/kube:1", False, KUBELET.spec_hash())
    assert kinds(diff_host(plan, facts)) == [("start", "kubelet")]


def test_a_container_started_by_rke_that_runs_otherwise_is_replaced():
    plan = worker_plan()
    facts = matching_facts(plan)
    other = dataclasses.replace(KUBELET, privileged=False).run_config()
    facts.containers["kubelet"] = ObservedContainer("kubelet", "k", "reg/kube:1", True, "", other)
    [action] = diff_host(plan, facts)
    assert (action.kind, action.reason) == ("replace", "not started by rke-py; it runs otherwise")


def rkes(spec: ContainerSpec, image_env: frozenset[str] = frozenset()) -> ObservedContainer:
    """The container RKE started for `spec`: no hash, what Docker shows of it, its flags in RKE's order."""
    shown = dataclasses.replace(spec.run_config(image_env), command=tuple(reversed(spec.command)))
    return ObservedContainer(spec.name, "rke-" + spec.name, spec.image, spec.start, "", shown, image_env)


def test_a_container_rke_started_that_runs_what_rke_py_would_is_kept():
    """A cluster taken over restarts only what must change: RKE's flag order (a Go map's) and the image's
    own environment do not count."""
    kubelet = dataclasses.replace(KUBELET, command=("--v=2", "--max-pods=110"), env=("PATH=/bin", "A=1"))
    plan = worker_plan()
    plan.placed[2] = Placed("worker", kubelet)
    facts = matching_facts(plan)
    facts.containers["kubelet"] = rkes(kubelet, frozenset({"PATH=/bin"}))
    assert diff_host(plan, facts) == []
    facts.containers["kubelet"] = rkes(dataclasses.replace(kubelet, command=("--v=3", "--max-pods=110")))
    assert kinds(diff_host(plan, facts)) == [("replace", "kubelet")]


def test_rkes_container_is_replaced_when_a_file_it_reads_or_a_volume_it_starts_from_is_new():
    plan = worker_plan()
    facts = matching_facts(plan)
    facts.containers["nginx-proxy"] = rkes(PROXY)
    facts.containers["kubelet"] = rkes(dataclasses.replace(KUBELET, volumes_from=("service-sidekick",)))
    plan.placed[2] = Placed("worker", dataclasses.replace(KUBELET, volumes_from=("service-sidekick",)))
    assert diff_host(plan, facts) == []
    facts.file_hashes[CONF.path] = "another"
    del facts.containers["service-sidekick"]
    assert kinds(diff_host(plan, facts)) == [
        ("write-file", CONF.path),
        ("replace", "nginx-proxy"),
        ("create", "service-sidekick"),
        ("replace", "kubelet"),
    ]


def test_rkes_proxy_for_the_same_apiservers_is_kept_though_rke_py_writes_its_own_conf():
    """Replacing it would cut the node off the API for a moment; RKE's proxy reads no file of the host's."""
    proxy = dataclasses.replace(PROXY, entrypoint=("nginx", "-c", "x"), env=("CP_HOSTS=10.0.0.1,10.0.0.2",))
    plan = worker_plan()
    plan.placed[0] = Placed("worker", proxy)
    facts = matching_facts(plan)
    del facts.file_hashes[CONF.path]  # a cluster RKE built: rke-py's nginx.conf is new
    shown = dataclasses.replace(
        proxy.run_config(), entrypoint=("nginx-proxy",), command=proxy.env, binds=frozenset()
    )
    facts.containers["nginx-proxy"] = ObservedContainer("nginx-proxy", "r", proxy.image, True, "", shown)
    assert kinds(diff_host(plan, facts)) == [("write-file", CONF.path)]
    elsewhere = dataclasses.replace(shown, command=("CP_HOSTS=10.0.0.1",))
    facts.containers["nginx-proxy"] = ObservedContainer("nginx-proxy", "r", proxy.image, True, "", elsewhere)
    assert kinds(diff_host(plan, facts)) == [("write-file", CONF.path), ("replace", "nginx-proxy")]


def test_a_component_the_node_no_longer_needs_is_removed_first():
    plan = worker_plan()
    facts = matching_facts(plan)
    facts.containers["kube-apiserver"] = ObservedContainer("kube-apiserver", "a", "reg/kube:1", True, "h")
    actions = diff_host(plan, facts)
    assert kinds(actions) == [("remove", "kube-apiserver")]
    assert actions[0].phase == "cleanup"


def test_a_changed_file_is_rewritten_and_only_present_images_are_skipped():
    plan = worker_plan()
    facts = matching_facts(plan)
    facts.file_hashes[CONF.path] = "0" * 64
    assert kinds(diff_host(plan, facts)) == [("write-file", CONF.path)]


def test_leftovers_are_removed():
    plan = worker_plan()
    facts = matching_facts(plan)
    for name in ("old-kubelet", "cert-deployer"):
        facts.others[name] = ObservedContainer(name, "id-" + name, "i", False, "")
    actions = diff_host(plan, facts)
    assert [(a.kind, a.target, a.reason) for a in actions] == [
        ("remove", "cert-deployer", "RKE's one-shot helper, left over from an RKE run"),
        ("remove", "old-kubelet", "left by an interrupted replace"),
    ]
    assert [a.id for a in actions] == ["id-cert-deployer", "id-old-kubelet"]


def test_a_replace_carries_the_old_container_to_put_back():
    plan = worker_plan()
    facts = matching_facts(plan)
    facts.containers["kubelet"] = ObservedContainer("kubelet", "k", "reg/kube:1", False, "other")
    [action] = diff_host(plan, facts)
    assert (action.kind, action.old_id, action.old_running, action.phase) == ("replace", "k", False, "worker")
