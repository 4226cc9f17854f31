"""What `up` does to objects in the Kubernetes API: applied when changed, a Job made anew when its pod
template changed (the API refuses that in place), pruned when no longer wanted."""

from __future__ import annotations

import copy

from rke_py.addons import k8s
from rke_py.deploy.objects import object_actions, prune_actions, stamped


def _job(image: str) -> dict:
    pod = {"containers": [{"name": "create", "image": image}], "restartPolicy": "OnFailure"}
    return k8s.obj("batch/v1", "Job", "certgen", "ingress-nginx", spec={"template": {"spec": pod}})


def _as_held(obj: dict) -> dict:
    """What the API answers: rke-py's object with the fields the API adds."""
    held = copy.deepcopy(stamped(obj))
    held["metadata"]["uid"] = "1"
    if obj["kind"] == "Job":
        held["spec"]["template"]["metadata"] = {"labels": {"job-name": "certgen"}}
        held["spec"]["backoffLimit"] = 6
    return held


def test_a_job_whose_pod_template_changed_is_made_anew_an_unchanged_one_is_left_alone():
    old, new = _job("certgen:v1"), _job("certgen:v2")
    assert object_actions([old], lambda _: _as_held(old)) == []
    [action] = object_actions([new], lambda _: _as_held(old))
    assert action.recreate and "deleted and created again" in action.reason
    [configmap] = object_actions(
        [k8s.config_map("c", {"a": "2"})], lambda _: _as_held(k8s.config_map("c", {"a": "1"}))
    )
    assert not configmap.recreate  # changed in place


def test_a_daemonset_whose_selector_changed_is_made_anew():
    def daemonset(selector: dict) -> dict:
        pod = {"containers": [{"name": "flanneld", "image": "flannel"}]}
        template = {"metadata": {"labels": {"k8s-app": "flannel", "tier": "node"}}, "spec": pod}
        spec = {"selector": {"matchLabels": selector}, "template": template}
        return k8s.obj("apps/v1", "DaemonSet", "kube-flannel", "kube-system", spec=spec)

    old = daemonset({"k8s-app": "flannel", "tier": "node"})
    [action] = object_actions([daemonset({"k8s-app": "flannel"})], lambda _: _as_held(old))
    assert action.recreate and "its selector cannot change" in action.reason


def test_a_cluster_scoped_object_given_a_namespace_is_not_pruned():
    wanted = [
        k8s.obj("networking.k8s.io/v1", "IngressClass", "nginx", "ingress-nginx"),
        k8s.config_map("settings", {}, "a"),
    ]
    found = [
        k8s.obj("networking.k8s.io/v1", "IngressClass", "nginx"),  # as the API keeps it
        k8s.obj("networking.k8s.io/v1", "IngressClass", "old"),
        k8s.config_map("settings", {}, "a"),
        k8s.config_map("settings", {}, "b"),  # namespaced: another namespace is another object
    ]
    gone = [action.ref for action in prune_actions(wanted, found, "no longer wanted")]
    assert gone == ["ingressclass/old", "configmap/b/settings"]


def test_fields_the_api_leaves_out_at_their_zero_value_are_not_a_change():
    pod = {"containers": [{"name": "c", "image": "i", "env": [{"name": "IP", "value": ""}]}]}
    spec = {"minReadySeconds": 0, "template": {"spec": pod}, "paused": False}
    desired = k8s.obj("apps/v1", "DaemonSet", "d", "kube-system", spec=spec)
    held = copy.deepcopy(stamped(desired))
    held["spec"] = {
        "template": {"spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "IP"}]}]}}
    }
    assert object_actions([desired], lambda _: held) == []
    held["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "10.0.0.1"  # someone set it
    [action] = object_actions([desired], lambda _: held)
    assert "spec differs" in action.reason
