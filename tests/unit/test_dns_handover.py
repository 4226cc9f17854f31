"""Handing cluster DNS from one provider to the other: the old provider's pods leave the Services before
they stop, and the Services select every pod of the new provider again once the old one is gone."""

from __future__ import annotations

from rke_py.addons import build
from rke_py.addons.k8s import object_ref
from rke_py.config import load_text
from rke_py.deploy.actions import ApplyObject, DeleteObject, ServeOnly
from rke_py.deploy.handover import handed_over, narrowed
from rke_py.deploy.objects import object_actions, stamped

BASE = "nodes:\n  - {address: 192.0.2.11, user: ubuntu, role: [etcd, controlplane, worker]}\n"
NODELOCAL = "  nodelocal: {ip_address: 169.254.20.10}\n"


def _wanted(provider: str, extra: str = "") -> list[dict]:
    config = load_text(f"{BASE}dns:\n  provider: {provider}\n{extra}").config
    return [o for addon in build(config) for o in addon.objects]


def _left(*refs: str) -> list[DeleteObject]:
    kinds = {"deployment": ("apps/v1", "Deployment"), "configmap": ("v1", "ConfigMap")}
    deletes = []
    for ref in refs:
        kind, namespace, name = ref.split("/")
        deletes.append(DeleteObject(*kinds[kind], namespace, name, ref=ref, addon="rke-kube-dns-addon"))
    return deletes


def test_leaving_kube_dns_for_coredns_first_takes_its_pods_out_of_both_services_and_then_restores_them():
    wanted = _wanted("coredns", NODELOCAL)
    deletes = _left("deployment/kube-system/kube-dns", "configmap/kube-system/kube-dns")
    actions = handed_over(deletes, "coredns", wanted)
    serve, config_map, deployment, first, second = actions
    assert isinstance(serve, ServeOnly)
    assert (serve.deployment, serve.leaving, serve.addon) == ("coredns", "kube-dns", "rke-kube-dns-addon")
    services = ["service/kube-system/kube-dns", "service/kube-system/kube-dns-upstream"]
    assert [object_ref(s) for s in serve.services] == services
    assert config_map == deletes[1] and not config_map.until_gone
    # last, and waited for until its pods are gone: until then they would rejoin the restored Services
    assert isinstance(deployment, DeleteObject) and deployment.ref == "deployment/kube-system/kube-dns"
    assert deployment.until_gone
    for restore, ref in zip((first, second), services, strict=True):
        assert isinstance(restore, ApplyObject) and restore.ref == ref and restore.phase == "addons"
        assert restore.obj == stamped(next(o for o in wanted if object_ref(o) == ref))
        assert restore.obj["spec"]["selector"] == {"k8s-app": "kube-dns"}


def test_leaving_coredns_for_kube_dns_hands_over_to_kube_dns():
    actions = handed_over(_left("deployment/kube-system/coredns"), "kube-dns", _wanted("kube-dns"))
    assert isinstance(actions[0], ServeOnly) and actions[0].deployment == "kube-dns"
    assert [object_ref(s) for s in actions[0].services] == ["service/kube-system/kube-dns"]


def test_nothing_to_hand_over_to_without_a_provider_or_when_the_old_deployment_is_already_gone():
    deletes = _left("deployment/kube-system/kube-dns", "configmap/kube-system/kube-dns")
    assert handed_over(deletes, "none", _wanted("none")) == deletes
    assert handed_over(deletes[1:], "coredns", _wanted("coredns")) == deletes[1:]


def test_a_service_a_killed_run_left_narrowed_is_applied_again_by_the_next_up():
    service = next(o for o in _wanted("coredns") if object_ref(o) == "service/kube-system/kube-dns")
    held = narrowed(stamped(service), "5d4f8c")
    assert held["spec"]["selector"] == {"k8s-app": "kube-dns", "pod-template-hash": "5d4f8c"}
    assert service["spec"]["selector"] == {"k8s-app": "kube-dns"}  # the wanted object is left as it was
    [again] = object_actions([service], lambda obj: held)
    assert again.ref == "service/kube-system/kube-dns"
    assert object_actions([service], lambda obj: stamped(service)) == []
