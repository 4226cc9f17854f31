"""Add-ons on a 2-node lab: RKE's canal DaemonSet taken over in place, every add-on applied and left alone
by a second `up`, switched plugin and `none` providers pruned, user add-ons applied and changed, rollouts in
`status`, and every object of every variant accepted by the apiserver's server-side dry run.

The lab cannot pull the add-ons' images, so their pods never become ready: `up` runs with --no-verify and
`status` reports the rollouts as not ready (the stand-ins have no workload controllers; real Kubernetes
cannot pull the images). What is checked is what rke-py is responsible for: the objects in the API.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rke_py import config as config_pkg
from rke_py.addons import ADDON_LABEL, build
from rke_py.config import kdm
from tests.lab.e2e import cluster_args, edit_cluster_yml, kubectl, kubectl_run, own_lab, rke_py, up

pytestmark = pytest.mark.lab

RKE_CANAL = {  # what RKE's add-on Job left: applied with kubectl's client-side apply, no rke-py labels
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "canal", "namespace": "kube-system", "labels": {"k8s-app": "canal"}},
    "spec": {
        "selector": {"matchLabels": {"k8s-app": "canal"}},
        "template": {
            "metadata": {"labels": {"k8s-app": "canal"}},
            "spec": {
                "containers": [{"name": "calico-node", "image": "rancher/mirrored-calico-node:v3.26.3"}]
            },
        },
    },
}
OLD_FLANNEL = {  # kube-flannel as rke-py releases before RKE's templates were matched selected it
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "kube-flannel", "namespace": "kube-system"},
    "spec": {
        "selector": {"matchLabels": {"k8s-app": "flannel", "tier": "node"}},
        "template": {
            "metadata": {"labels": {"k8s-app": "flannel", "tier": "node"}},
            "spec": {"containers": [{"name": "kube-flannel", "image": "flannel:v0"}]},
        },
    },
}
USER_ADDON = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: team-settings
  namespace: default
data:
  level: "1"
---
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
"""
INCLUDED = """\
apiVersion: v1
kind: ServiceAccount
metadata:
  name: deployer
  namespace: team-a
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    with own_lab(tmp_path_factory, "addons", 2) as made:
        yield made


def _with_addon_images(data) -> None:
    """The lab's Kubernetes version may be one rke-py has no add-on images for: name KDM's (which the lab
    cannot pull either way)."""
    images = data.setdefault("system_images", {})
    for key, image in kdm.system_images(kdm.DEFAULT_K8S_VERSION).items():
        images.setdefault(key, image)


def _enable(data) -> None:
    _with_addon_images(data)
    data["network"] = {"plugin": "canal", "options": {"canal_iface": "eth0"}}
    data["dns"] = {
        "provider": "coredns",
        "upstreamnameservers": ["10.0.0.2"],
        "stubdomains": {"corp.example.com": ["10.0.0.3"]},
        "nodelocal": {"ip_address": "169.254.20.10"},
    }
    data["monitoring"] = {"provider": "metrics-server"}
    data["ingress"] = {"provider": "nginx", "options": {"proxy-body-size": "8m"}, "default_backend": True}
    data["addons"] = USER_ADDON
    data["addons_include"] = ["team-a.yml"]


def _get(lab, *args: str) -> dict:
    return json.loads(kubectl(lab, "get", *args, "-o", "json"))


def _exists(lab, *args: str) -> bool:
    return kubectl_run(lab, "get", *args).returncode == 0


def _addon_actions(doc: dict) -> list[tuple[str, str, str]]:
    return [(a["kind"], a["target"], a.get("addon", "")) for a in doc["cluster"] if a["phase"] == "addons"]


def test_add_ons_are_applied_taking_rke_objects_over_and_a_second_up_changes_nothing(lab):
    assert up(lab, "--no-verify").code == 0  # the lab's cluster.yml turns every add-on off
    kubectl(lab, "apply", "-f", "-", stdin=json.dumps(RKE_CANAL))
    uid = _get(lab, "daemonset", "-n", "kube-system", "canal")["metadata"]["uid"]
    (Path(lab.cluster_yml).parent / "team-a.yml").write_text(INCLUDED)
    edit_cluster_yml(lab, _enable)

    plan = rke_py("plan", *cluster_args(lab, "--output", "json"))
    assert plan.code == 0, plan.stderr
    planned = _addon_actions(plan.json())
    assert ("apply", "daemonset/kube-system/canal", "rke-network-plugin") in planned
    assert ("apply", "deployment/kube-system/coredns", "rke-coredns-addon") in planned
    assert ("apply", "daemonset/kube-system/node-local-dns", "rke-nodelocal-addon") in planned
    assert ("apply", "apiservice/v1beta1.metrics.k8s.io", "rke-metrics-addon") in planned
    assert ("apply", "daemonset/ingress-nginx/nginx-ingress-controller", "rke-ingress-controller") in planned
    assert ("apply", "configmap/default/team-settings", "rke-user-addon") in planned
    assert ("apply", "serviceaccount/team-a/deployer", "rke-user-includes-addons") in planned
    canal_reason = next(
        a["reason"] for a in plan.json()["cluster"] if a["target"] == "daemonset/kube-system/canal"
    )
    assert canal_reason.startswith("not applied by rke-py yet")

    run = up(lab, "--no-verify")
    assert run.code == 0, run.stderr
    canal = _get(lab, "daemonset", "-n", "kube-system", "canal")
    assert canal["metadata"]["uid"] == uid  # taken over in place, not deleted and created again
    assert canal["metadata"]["labels"][ADDON_LABEL] == "rke-network-plugin"
    assert [c["name"] for c in canal["spec"]["template"]["spec"]["containers"]] == [
        "calico-node",
        "kube-flannel",
    ]
    corefile = _get(lab, "configmap", "-n", "kube-system", "coredns")["data"]["Corefile"]
    assert "forward . 10.0.0.2" in corefile and "corp.example.com:53" in corefile
    assert _get(lab, "service", "-n", "kube-system", "kube-dns")["spec"]["clusterIP"] == "10.43.0.10"
    assert _get(lab, "configmap", "-n", "ingress-nginx", "ingress-nginx-controller")["data"] == {
        "proxy-body-size": "8m"
    }
    assert _exists(lab, "deployment", "-n", "ingress-nginx", "default-http-backend")
    assert _get(lab, "configmap", "team-settings")["data"] == {"level": "1"}
    assert _exists(lab, "serviceaccount", "-n", "team-a", "deployer")

    again = up(lab, "--no-verify")
    assert again.code == 0, again.stderr
    assert _addon_actions(again.json()) == []


def test_status_reports_each_add_on_rollout(lab):
    run = rke_py("status", *cluster_args(lab, "--output", "json"))
    rows = {c["target"]: c for c in run.json()["checks"] if c["name"] == "addon"}
    assert set(rows) >= {
        "daemonset/kube-system/canal",
        "deployment/kube-system/coredns",
        "deployment/kube-system/coredns-autoscaler",
        "daemonset/kube-system/node-local-dns",
        "deployment/kube-system/metrics-server",
        "daemonset/ingress-nginx/nginx-ingress-controller",
        "deployment/ingress-nginx/default-http-backend",
    }
    # no add-on image can be pulled into the lab: no rollout completes, and status says so (exit 6)
    assert run.code == 6
    assert not rows["daemonset/kube-system/canal"]["ok"]
    assert rows["daemonset/kube-system/canal"]["detail"].startswith("rke-network-plugin: ")


def test_a_changed_admission_job_is_made_anew(lab):
    """A Job's pod template cannot change in place: the ingress admission Jobs are deleted and created
    again when their nodes change, and left alone otherwise."""
    job = ("job", "-n", "ingress-nginx", "ingress-nginx-admission-create")
    uid = _get(lab, *job)["metadata"]["uid"]
    edit_cluster_yml(lab, lambda data: data["ingress"].update(node_selector={"ingress": "yes"}))
    run = up(lab, "--no-verify")
    assert run.code == 0, run.stderr
    reasons = {a["target"]: a["reason"] for a in run.json()["cluster"] if a["kind"] == "apply"}
    assert "deleted and created again" in reasons["job/ingress-nginx/ingress-nginx-admission-create"]
    created = _get(lab, *job)
    assert created["metadata"]["uid"] != uid
    assert created["spec"]["template"]["spec"]["nodeSelector"] == {
        "kubernetes.io/os": "linux",
        "ingress": "yes",
    }
    assert _addon_actions(up(lab, "--no-verify").json()) == []


def test_switching_dns_to_kube_dns_removes_coredns_and_keeps_the_service(lab):
    service = _get(lab, "service", "-n", "kube-system", "kube-dns")["metadata"]["uid"]
    edit_cluster_yml(lab, lambda data: data["dns"].update(provider="kube-dns"))
    run = up(lab, "--no-verify")
    assert run.code == 0, run.stderr
    deleted = {a["target"] for a in run.json()["cluster"] if a["kind"] == "delete"}
    assert {
        "deployment/kube-system/coredns",
        "deployment/kube-system/coredns-autoscaler",
        "configmap/kube-system/coredns",
        "serviceaccount/kube-system/coredns",
        "clusterrole/system:coredns",
    } <= deleted
    assert not _exists(lab, "deployment", "-n", "kube-system", "coredns")
    assert _exists(lab, "deployment", "-n", "kube-system", "kube-dns")
    held = _get(lab, "service", "-n", "kube-system", "kube-dns")  # both providers' Service: taken over
    assert held["metadata"]["uid"] == service
    assert held["metadata"]["labels"][ADDON_LABEL] == "rke-kube-dns-addon"
    assert _addon_actions(up(lab, "--no-verify").json()) == []


def test_switching_plugin_and_providers_prunes_what_is_no_longer_wanted(lab):
    def switch(data) -> None:
        data["network"] = {"plugin": "flannel"}
        data["dns"] = {"provider": "none"}
        data["addons"] = USER_ADDON.replace('level: "1"', 'level: "2"').split("---")[0]
        data["addons_include"] = []

    edit_cluster_yml(lab, switch)
    kubectl(lab, "apply", "-f", "-", stdin=json.dumps(OLD_FLANNEL))
    run = up(lab, "--no-verify")
    assert run.code == 0, run.stderr
    deleted = [a["target"] for a in run.json()["cluster"] if a["kind"] == "delete"]
    applied = {a["target"]: a["reason"] for a in run.json()["cluster"] if a["kind"] == "apply"}
    assert "its selector cannot change" in applied["daemonset/kube-system/kube-flannel"]
    flannel = _get(lab, "daemonset", "-n", "kube-system", "kube-flannel")
    assert flannel["spec"]["selector"] == {"matchLabels": {"k8s-app": "flannel"}}
    assert {
        "daemonset/kube-system/canal",
        "deployment/kube-system/kube-dns",
        "service/kube-system/kube-dns",
        "daemonset/kube-system/node-local-dns",
        "namespace/team-a",
        "serviceaccount/team-a/deployer",
    } <= set(deleted)
    assert deleted.index("namespace/team-a") > deleted.index(
        "configmap/kube-system/kube-dns"
    )  # namespaces last
    assert not any("metrics-server" in target or "ingress" in target for target in deleted)
    assert not _exists(lab, "daemonset", "-n", "kube-system", "canal")
    assert not _exists(lab, "deployment", "-n", "kube-system", "kube-dns")
    assert not _exists(lab, "service", "-n", "kube-system", "kube-dns")
    assert _exists(lab, "daemonset", "-n", "kube-system", "kube-flannel")
    assert _exists(lab, "deployment", "-n", "kube-system", "metrics-server")
    assert _get(lab, "configmap", "team-settings")["data"] == {"level": "2"}
    assert _addon_actions(up(lab, "--no-verify").json()) == []


def test_every_variant_of_every_add_on_is_accepted_by_the_apiserver(lab):
    """Server-side dry run of each plugin and option the templates know, through kubectl."""
    base = YAML(typ="safe").load(Path(lab.cluster_yml).read_text())
    variants = {
        "canal": {"network": {"plugin": "canal", "mtu": 1400}},
        "flannel": {
            "network": {
                "plugin": "flannel",
                "options": {"flannel_iface": "eth0", "flannel_backend_type": "host-gw"},
            }
        },
        "calico": {
            "network": {"plugin": "calico", "mtu": 1400, "tolerations": [{"key": "a", "operator": "Exists"}]}
        },
        "kube-dns": {
            "dns": {
                "provider": "kube-dns",
                "upstreamnameservers": ["10.0.0.2"],
                "update_strategy": {"strategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            }
        },
        "coredns": {
            "dns": {
                "provider": "coredns",
                "nodelocal": {"ip_address": "169.254.20.10"},
                "reversecidrs": ["10.0.0.0/8"],
            }
        },
        "ingress": {
            "ingress": {
                "provider": "nginx",
                "network_mode": "hostNetwork",
                "http_port": 8080,
                "https_port": 8443,
                "default_backend": True,
                "extra_args": {"enable-ssl-passthrough": "true"},
            }
        },
        "metrics": {"monitoring": {"provider": "metrics-server", "replicas": 2, "options": {"v": "2"}}},
    }
    if not _exists(lab, "namespace", "ingress-nginx"):
        kubectl(lab, "create", "namespace", "ingress-nginx")
    _with_addon_images(base)
    for name, change in variants.items():
        loaded = config_pkg.load_text(json.dumps({**base, **change}), f"{name}.yml")
        objects = [o for addon in build(loaded.config, Path(lab.cluster_yml).parent) for o in addon.objects]
        # a Job's pod template cannot change in place (up makes it anew; the tests above check that)
        objects = [o for o in objects if o["kind"] not in ("Namespace", "Job")]
        items = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        dry_run = ("--server-side", "--dry-run=server", "--field-manager=rke-py", "--force-conflicts")
        done = kubectl_run(lab, "apply", *dry_run, "-f", "-", stdin=items)
        assert done.returncode == 0, f"{name}: {done.stderr}"
