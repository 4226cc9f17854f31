"""Pure parts of the lab kube-apiserver: who may do what, patches, selectors and kubectl's tables."""

from pathlib import Path

import pytest

from rke_py.lab.kube import objects, rbac, resources
from rke_py.lab.kube.apiserver import Authorizer, Request, User

LEASES = resources.lookup("coordination.k8s.io", "v1", "leases", True)
NODES = resources.lookup("", "v1", "nodes", False)
CONFIGMAPS = resources.lookup("", "v1", "configmaps", True)
BOOTSTRAP = rbac.bootstrap_objects()
NODES_BINDING = {  # what rke-py applies (plan/rbac.py)
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "system:node"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}],
}
NEW_CLUSTER = Authorizer(["Node", "RBAC"], lambda: rbac.Policy.from_objects(BOOTSTRAP))
WITH_BINDING = Authorizer(["Node", "RBAC"], lambda: rbac.Policy.from_objects([*BOOTSTRAP, NODES_BINDING]))


def allowed(
    user: User,
    verb: str,
    res: resources.Resource,
    ns: str = "",
    name: str = "",
    sub: str = "",
    authorizer: Authorizer = NEW_CLUSTER,
) -> bool:
    body = {"metadata": {"name": name}} if verb == "create" else None
    request = Request(verb, res, ns, "" if verb == "create" else name, sub, body)
    return authorizer.allowed(user, verb, "", request)


def test_leader_election_identities_write_only_their_leases() -> None:
    kcm = User("system:kube-controller-manager", ("system:authenticated",))
    assert allowed(kcm, "update", LEASES, "kube-system", "kube-controller-manager")
    assert allowed(kcm, "list", CONFIGMAPS)
    assert not allowed(kcm, "update", LEASES, "kube-system", "kube-scheduler")
    assert not allowed(kcm, "create", CONFIGMAPS, "kube-system", "x")
    # as the node-controller service account its controllers run as
    assert allowed(kcm, "update", NODES, "", "lab-1", "status")


def test_the_shared_node_identity_gets_nothing_until_rke_py_binds_group_system_nodes() -> None:
    """Real kube-apiserver v1.28: RKE's kube-node certificate (CN system:node) is no node to the Node
    authorizer, and Kubernetes' own system:node binding has no subjects (reference authorization answers)."""
    shared = User("system:node", ("system:nodes", "system:authenticated"))
    assert not allowed(shared, "create", NODES, "", "lab-9")
    assert not allowed(shared, "patch", NODES, "", "lab-9", "status")
    assert not allowed(shared, "update", LEASES, "kube-node-lease", "lab-9")
    assert allowed(shared, "create", NODES, "", "lab-9", authorizer=WITH_BINDING)
    assert allowed(shared, "update", LEASES, "kube-node-lease", "lab-9", authorizer=WITH_BINDING)


def test_a_per_node_identity_touches_only_its_own_objects() -> None:
    own = User("system:node:lab-1", ("system:nodes", "system:authenticated"))
    assert allowed(own, "create", NODES, "", "lab-1")
    assert not allowed(own, "create", NODES, "", "lab-2")
    assert allowed(own, "patch", NODES, "", "lab-1", "status")
    assert allowed(own, "update", LEASES, "kube-node-lease", "lab-1")
    assert not allowed(own, "update", LEASES, "kube-system", "kube-scheduler")
    assert not allowed(own, "delete", NODES, "", "lab-1")


def test_the_apiserver_may_not_use_the_kubelet_api_on_a_new_cluster() -> None:
    apiserver = User("kube-apiserver", ("system:authenticated",))
    for sub in ("proxy", "log"):
        assert not allowed(apiserver, "get", NODES, "", "lab-1", sub)


def test_masters_do_anything_and_strangers_nothing_but_health() -> None:
    admin = User("kube-admin", ("system:masters", "system:authenticated"))
    stranger = User("someone", ("system:authenticated",))
    assert allowed(admin, "delete", NODES, "", "lab-1")
    assert not allowed(stranger, "get", NODES, "", "lab-1")
    assert NEW_CLUSTER.allowed(stranger, "get", "/healthz", None)
    assert NEW_CLUSTER.allowed(stranger, "get", "/apis", None)
    assert not NEW_CLUSTER.allowed(stranger, "get", "/metrics", None)
    anonymous = User("system:anonymous", ("system:unauthenticated",))
    assert NEW_CLUSTER.allowed(anonymous, "get", "/version", None)
    assert not NEW_CLUSTER.allowed(anonymous, "get", "/apis", None)


def test_merge_patch() -> None:
    obj = {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"taints": [{"key": "t"}]}}
    patch = {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"taints": [{"key": "u"}]}}
    assert objects.merge_patch(obj, patch) == {
        "metadata": {"labels": {"b": "2", "c": "3"}},
        "spec": {"taints": [{"key": "u"}]},
    }
    assert obj["metadata"]["labels"] == {"a": "1", "b": "2"}


def test_strategic_merge_patch_merges_lists_by_their_merge_key() -> None:
    deployment = {
        "spec": {
            "containers": [
                {"name": "a", "image": "a:1", "ports": [{"containerPort": 80}]},
                {"name": "b", "image": "b:1"},
            ],
            "args": ["x", "y"],
        }
    }
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
            "containers": [{"name": "a", "image": "a:2"}, {"name": "b", "$patch": "delete"}, {"name": "c"}],
            "args": ["z"],
        }
    }
    assert objects.strategic_merge_patch(deployment, patch) == {
        "spec": {
            "containers": [{"name": "c"}, {"name": "a", "image": "a:2", "ports": [{"containerPort": 80}]}],
            "args": ["z"],
        }
    }


def test_json_patch() -> None:
    obj = {"spec": {"taints": [{"key": "a"}]}}
    ops = [
        {"op": "add", "path": "/spec/taints/-", "value": {"key": "b"}},
        {"op": "replace", "path": "/spec/taints/0/key", "value": "z"},
        {"op": "add", "path": "/metadata", "value": {"labels": {"x~y/z": "1"}}},
        {"op": "remove", "path": "/metadata/labels/x~0y~1z"},
    ]
    assert objects.json_patch(obj, ops) == {
        "spec": {"taints": [{"key": "z"}, {"key": "b"}]},
        "metadata": {"labels": {}},
    }
    with pytest.raises(objects.PatchError):
        objects.json_patch(obj, [{"op": "test", "path": "/spec", "value": {}}])


def test_selectors() -> None:
    node = {"metadata": {"name": "lab-1", "labels": {"node-role.kubernetes.io/worker": "true", "env": "lab"}}}
    assert resources.label_matcher("env=lab,node-role.kubernetes.io/worker")(node)
    assert not resources.label_matcher("env!=lab")(node)
    assert resources.label_matcher("!missing")(node)
    assert resources.field_matcher("metadata.name=lab-1")(node)
    assert not resources.field_matcher("metadata.name!=lab-1")(node)
    with pytest.raises(resources.SelectorError):
        resources.field_matcher("spec.unschedulable=true")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(5, "5s"), (119, "119s"), (150, "2m30s"), (3600, "60m"), (4 * 3600, "4h"), (3 * 86400, "3d")],
)
def test_ages_read_like_kubectl(seconds: int, text: str) -> None:
    assert resources.human_duration(seconds) == text


def test_node_table_row() -> None:
    node = {
        "metadata": {
            "name": "lab-1",
            "creationTimestamp": "2000-01-01T00:00:00Z",
            "labels": {
                "node-role.kubernetes.io/controlplane": "true",
                "node-role.kubernetes.io/etcd": "true",
            },
        },
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
            "nodeInfo": {"kubeletVersion": "v1.30.4-lab"},
        },
    }
    table = resources.table("Node", [node], "7", "Metadata")
    assert [c["name"] for c in table["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Status", "Roles", "Age", "Version",
    ]  # fmt: skip
    cells = table["rows"][0]["cells"]
    assert cells[:3] == ["lab-1", "Ready,SchedulingDisabled", "controlplane,etcd"]
    assert cells[4:6] == ["v1.30.4-lab", "10.0.0.2"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_discovery_names_core_resources_with_short_names() -> None:
    core = {r["name"]: r for r in resources.resource_list("", "v1")["resources"]}
    assert core["nodes"]["namespaced"] is False and core["nodes"]["shortNames"] == ["no"]
    assert core["configmaps"]["shortNames"] == ["cm"] and core["namespaces"]["shortNames"] == ["ns"]
    assert core["nodes/status"]["verbs"] == ["get", "patch", "update"]
    groups = {g["name"] for g in resources.api_group_list()["groups"]}
    assert {"coordination.k8s.io", "apps", "rbac.authorization.k8s.io", "batch"} <= groups


def test_keys_follow_the_real_etcd_layout() -> None:
    assert NODES.key("/registry", "", "lab-1") == "/registry/minions/lab-1"
    assert (
        LEASES.key("/registry", "kube-system", "kube-scheduler")
        == "/registry/leases/kube-system/kube-scheduler"
    )
    widget = resources.lookup("apps", "v1", "widgets", True)
    assert widget is not None and widget.key("/registry", "ns", "w") == "/registry/apps/widgets/ns/w"
    assert resources.lookup("nope.example.com", "v1", "widgets", True) is None


ANSWERS = Path(__file__).parents[1] / "fixtures" / "authorization-answers-v1.28.0.tsv"


def _question(text: str) -> tuple[str, resources.Resource, str, str, str]:
    """`kubectl auth can-i` arguments → (verb, resource, namespace, name, subresource)."""
    words = text.split()
    verb, what = words[0], words[1]
    ns = words[words.index("-n") + 1] if "-n" in words else ""
    sub = next((w.split("=", 1)[1] for w in words if w.startswith("--subresource=")), "")
    plural, _, name = what.partition("/")
    plural, dot, group = plural.partition(".")
    found = [r for r in resources.RESOURCES if r.plural == plural and (not dot or r.group == group)]
    assert found, f"the lab does not know {what}"
    return verb, found[0], ns, name, sub


@pytest.mark.parametrize("row", ANSWERS.read_text().splitlines()[1:])
def test_the_lab_answers_as_a_real_v1_28_apiserver_before_anything_is_applied(row: str) -> None:
    user, groups, question, answer = row.split("\t")
    identity = User(user, (*filter(None, groups.split(",")), "system:authenticated"))
    verb, res, ns, name, sub = _question(question)
    assert allowed(identity, verb, res, ns, name, sub) == (answer == "yes"), row
