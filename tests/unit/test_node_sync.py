"""The labels and taints `up` sets on each Node: RKE's roles and the file's, never someone else's taints."""

from rke_py.config.schema import Node, Taint
from rke_py.deploy.nodesync import node_patch


def test_a_controlplane_only_node_gets_its_role_label_and_taint_and_loses_stale_roles():
    node = Node(address="10.0.0.1", internal_address="10.0.0.1", role=["controlplane"], labels={"zone": "a"})
    current = {
        "spec": {"taints": [{"key": "node-role.kubernetes.io/etcd", "value": "true", "effect": "NoExecute"}]}
    }
    patch = node_patch(node, current)
    assert patch["metadata"]["labels"] == {
        "node-role.kubernetes.io/etcd": None,
        "node-role.kubernetes.io/controlplane": "true",
        "node-role.kubernetes.io/worker": None,
        "zone": "a",
        "rke.cattle.io/external-ip": "10.0.0.1",
        "rke.cattle.io/internal-ip": "10.0.0.1",
    }
    assert patch["spec"]["taints"] == [
        {"key": "node-role.kubernetes.io/controlplane", "value": "true", "effect": "NoSchedule"}
    ]


def test_taints_set_by_others_stay_and_configured_ones_replace_their_old_values():
    node = Node(address="w1", role=["worker"], taints=[Taint("dedicated", "gpu", "NoSchedule")])
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    current = {
        "spec": {"taints": [unreachable, {"key": "dedicated", "value": "old", "effect": "NoSchedule"}]}
    }
    assert node_patch(node, current)["spec"]["taints"] == [
        unreachable,
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    ]


def test_a_worker_without_taints_clears_the_list():
    assert node_patch(Node(address="w1", role=["worker"]), {"spec": {}})["spec"]["taints"] is None
