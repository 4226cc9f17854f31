"""`up` exits 0 only when a user's first command works: the namespaces' accounts and root CA are there, and
a pod is admitted. Until the controller-manager made them, a `kubectl run` is refused."""

from __future__ import annotations

from rke_py.config.schema import ClusterConfig
from rke_py.deploy.seeds import NAMESPACES
from rke_py.kube.api import KubeAPIError
from rke_py.verify.checks import _cluster_checks
from tests.unit.fakehost import FakeKube


def usable(api: FakeKube) -> dict[tuple[str, str], tuple[bool, str]]:
    report = _cluster_checks(ClusterConfig(), {}, api, [])
    return {(c.name, c.target): (c.ok, c.detail) for c in report.checks if c.name in ("namespace", "pod")}


def test_a_cluster_whose_controllers_did_their_work_takes_a_pod():
    found = usable(FakeKube())
    assert set(found) == {("namespace", ns) for ns in NAMESPACES} | {("pod", "default")}
    assert all(ok for ok, _ in found.values()), found


def test_until_the_default_account_exists_the_namespace_and_the_first_pod_fail_saying_why():
    api = FakeKube()
    del api.objects["/api/v1/namespaces/default/serviceaccounts/default"]
    del api.objects["/api/v1/namespaces/kube-public/configmaps/kube-root-ca.crt"]
    found = usable(api)
    assert found[("namespace", "default")] == (False, "no ServiceAccount default yet: pods there are refused")
    assert found[("namespace", "kube-public")] == (
        False,
        "no ConfigMap kube-root-ca.crt yet: pods there are refused",
    )
    ok, detail = found[("pod", "default")]
    assert not ok and detail.startswith("a pod is refused: "), detail
    assert found[("namespace", "kube-system")][0]


def test_a_pod_the_users_own_quota_refuses_still_shows_a_cluster_that_answers(monkeypatch):
    """A ResourceQuota asking limits of every pod refuses a bare one (403): that is the user's policy at
    work, not a cluster that is not ready, and must not fail every `up`."""
    api = FakeKube()

    def quota(method, path, body=None, content_type="application/json"):
        if method == "POST":
            raise KubeAPIError(f"POST {path}: HTTP 403: exceeded quota: compute, requested: pods=1", 403)
        return FakeKube.request(api, method, path, body, content_type)

    monkeypatch.setattr(api, "request", quota)
    ok, detail = usable(api)[("pod", "default")]
    assert ok and "exceeded quota" in detail, detail
