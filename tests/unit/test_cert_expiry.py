"""Certificate expiry: `status` fails on an expired certificate naming what renews it and warns a month
ahead; `up` warns about the state's certificates."""

from __future__ import annotations

import datetime as dt

from rke_py.deploy.session import Options
from rke_py.deploy.status import certificates, status
from rke_py.pki.expiry import KUBELET_SERVING, LOCAL, Expiry, ending, warning
from tests.unit.fakehost import FakeConnector
from tests.unit.test_deploy_fake import Cluster

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def expiry(name: str, days: float, where: str = LOCAL) -> Expiry:
    return Expiry(name, where, f"CN={name}", (), NOW + dt.timedelta(days=days))


def test_expired_and_expiring_within_a_month():
    found = [expiry("a", -1), expiry("b", 0), expiry("c", 29.5), expiry("d", 30), expiry("e", 31)]
    expired, soon = ending(found, NOW)
    assert [e.name for e in expired] == ["a", "b"]
    assert [e.name for e in soon] == ["c", "d"]


def test_each_warning_says_what_renews_the_certificate():
    assert warning(expiry("kube-node", -3), NOW, False) == (
        "certificate kube-node expired on 2029-12-29: run `rke-py cert rotate`"
    )
    assert warning(expiry("kube-ca", 12), NOW, False) == (
        "certificate kube-ca expires on 2030-01-13 (12 days): run `rke-py cert rotate --rotate-ca`"
    )
    served = warning(expiry(KUBELET_SERVING, -1, "10.0.0.2"), NOW, False)
    assert served.startswith("certificate kubelet serving served by 10.0.0.2 expired on 2029-12-31: set ")
    assert "generate_serving_certificate: true" in served
    assert warning(expiry(KUBELET_SERVING, -1, "10.0.0.2"), NOW, True).endswith("run `rke-py cert rotate`")


def test_status_fails_on_a_kubelets_expired_certificate(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.up()
    cluster.world.kubelet_days = -2
    report = status(cluster.desired(), Options(), FakeConnector(cluster.world))
    failed = [c for c in report.failures() if c.name == "certificate"]
    assert [c.target for c in failed] == [f"{KUBELET_SERVING} (10.0.0.{i})" for i in (1, 2, 3)]
    assert all("generate_serving_certificate: true" in c.detail for c in failed)


def test_status_warns_a_month_ahead_and_passes(tmp_path, caplog):
    cluster = Cluster(tmp_path)
    cluster.up()
    cluster.world.kubelet_days = 20
    report = status(cluster.desired(), Options(), FakeConnector(cluster.world))
    assert not [c for c in report.checks if c.name == "certificate"]
    assert "kubelet serving served by 10.0.0.1 expires on" in caplog.text


def test_cert_list_has_the_states_certificates_and_each_kubelets(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.up()
    found = certificates(cluster.desired(), Options(), FakeConnector(cluster.world))
    state = {e.name for e in found if e.where == LOCAL}
    assert state == set(cluster.desired().bundle)
    assert sorted(e.where for e in found if e.name == KUBELET_SERVING) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    apiserver = next(e for e in found if e.name == "kube-apiserver")
    assert "10.0.0.1" in apiserver.sans and "kubernetes.default" in apiserver.sans
    assert apiserver.days_left(dt.datetime.now(dt.UTC)) in (3648, 3649)
