"""Certificate rotation as RKE's `cert rotate` does it: which certificates get new keys, the CA kept or
replaced, the service-account key kept, and a run that rotates the CA (etcd together, the API asked with
the running credentials until the control plane has the new ones, add-on pods restarted)."""

from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from rke_py.config.schema import ClusterConfig, Node
from rke_py.deploy.desired import Rotation, prepare
from rke_py.deploy.session import Options
from rke_py.deploy.up import up
from rke_py.errors import ApplyError, ConfigError, UsageError
from rke_py.pki import CertificateError, build_bundle
from rke_py.pki.bundle import CA, KUBE_ADMIN, REQUESTHEADER_CA, SERVICE_ACCOUNT, rotate
from rke_py.state import read_state
from tests.certs import ending_at
from tests.unit.fakehost import FakeConnector
from tests.unit.test_deploy_fake import FIVE_NODES, OPTIONS, THREE_NODES, Cluster


def config() -> ClusterConfig:
    nodes = [
        Node(address="10.1.0.1", role=["controlplane", "etcd"], user="rke"),
        Node(address="10.1.0.2", role=["worker"], user="rke"),
    ]
    config = ClusterConfig(nodes=nodes)
    config.services.kube_api.service_cluster_ip_range = "10.43.0.0/16"
    config.services.kubelet.cluster_domain = "cluster.local"
    config.services.kubelet.generate_serving_certificate = True
    return config


@pytest.fixture(scope="module")
def bundle():
    return build_bundle(config())


def changed(old, new) -> set[str]:
    return {name for name in new if name not in old or new[name].cert_pem != old[name].cert_pem}


def new_keys(old, new) -> set[str]:
    return {name for name in new if name in old and new[name].key_pem != old[name].key_pem}


def test_rotating_everything_keeps_the_cas_and_the_service_account_key(bundle):
    rotated = rotate(config(), bundle)
    leaves = set(bundle) - {CA, REQUESTHEADER_CA}
    assert changed(bundle, rotated) == leaves  # every certificate renewed: none is left to expire
    assert new_keys(bundle, rotated) == leaves - {SERVICE_ACCOUNT}  # the pods' tokens stay valid
    assert rotated[CA] == bundle[CA] and rotated[REQUESTHEADER_CA] == bundle[REQUESTHEADER_CA]
    assert set(rotated) == set(bundle)


@pytest.mark.parametrize(
    ("services", "expected"),
    [
        (("kubelet",), {"kube-node", "kube-kubelet-10-1-0-1", "kube-kubelet-10-1-0-2"}),
        (("etcd",), {"kube-etcd-10-1-0-1"}),
        (("kube-apiserver", "kube-proxy"), {"kube-apiserver", "kube-proxy", SERVICE_ACCOUNT}),
    ],
)
def test_a_service_gets_new_keys_for_its_own_certificates_only(bundle, services, expected):
    rotated = rotate(config(), bundle, services)
    assert changed(bundle, rotated) == expected
    assert new_keys(bundle, rotated) == expected - {SERVICE_ACCOUNT}


def test_a_new_ca_resigns_everything_and_keeps_the_service_account_key(bundle):
    rotated = rotate(config(), bundle, ca=True)
    assert changed(bundle, rotated) == set(bundle)
    for name, pair in rotated.items():
        if name in (CA, REQUESTHEADER_CA):
            continue
        signer = rotated[REQUESTHEADER_CA if name == "kube-apiserver-proxy-client" else CA]
        assert pair.signed_by(signer), name
        assert not pair.signed_by(bundle[CA]), name
    assert rotated[SERVICE_ACCOUNT].key_pem == bundle[SERVICE_ACCOUNT].key_pem


def test_an_expired_ca_can_only_be_replaced(bundle):
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    expired = dict(bundle)
    expired[CA] = ending_at(bundle[CA], bundle[CA], past)
    with pytest.raises(CertificateError, match=r"kube-ca expired on .*: use --rotate-ca"):
        rotate(config(), expired)
    assert rotate(config(), expired, ca=True)[CA].x509.not_valid_after_utc > dt.datetime.now(dt.UTC)


def test_rotate_without_a_state_says_there_is_nothing_to_rotate(tmp_path):
    (tmp_path / "cluster.yml").write_text(textwrap.dedent(THREE_NODES))
    with pytest.raises(UsageError, match="no certificates to rotate yet"):
        prepare(tmp_path / "cluster.yml", rotation=Rotation())


def test_rotate_certificates_in_cluster_yml_is_checked_at_its_lines(tmp_path):
    path = tmp_path / "cluster.yml"
    path.write_text(
        textwrap.dedent(THREE_NODES)
        + "rotate_certificates:\n  cacertificates: sometimes\n  services: [kubelet, coredns]\n"
    )
    with pytest.raises(ConfigError) as e:
        prepare(path)
    text = str(e.value)
    assert f"{path}:7:3: cacertificates must be true or false" in text
    assert f"{path}:8:23: coredns is not a service with certificates" in text


class RecordingConnector(FakeConnector):
    def __init__(self, world):
        super().__init__(world)
        self.identities: list[object] = []

    def kube_api(self, servers, identity=None):
        self.identities.append(identity)
        return super().kube_api(servers, identity)


def test_a_ca_rotation_run(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.up()
    before = read_state(tmp_path / "cluster.rkestate")
    assert before is not None
    desired = prepare(cluster.path, registry=cluster.registry, rotation=Rotation(ca=True))
    assert desired.new_ca
    connector = RecordingConnector(cluster.world)
    mark = len(cluster.world.events)
    result = up(desired, Options(verify=False), connector=connector)

    running = before.current.certificates
    assert connector.identities[0] == (running[CA], running[KUBE_ADMIN])  # asked as the running cluster knows
    assert connector.identities[-1] is None  # then as the new admin
    etcd = [
        e for e in cluster.world.events[mark:] if e.endswith(" etcd") and e.split()[1] in ("stop", "start")
    ]
    assert etcd == [f"10.0.0.{i} {verb} etcd" for i in (1, 2, 3) for verb in ("stop", "start")]
    restarts = [x.target for x in result.cluster_actions if x.kind == "restart-pods"]
    workloads = [f"pods of {x}" for x in ("daemonset/kube-system/canal", "deployment/kube-system/coredns")]
    assert set(workloads) <= set(restarts)
    after = read_state(tmp_path / "cluster.rkestate")
    assert after is not None
    assert after.current.certificates[CA] == after.desired.certificates[CA] != running[CA]
    assert not prepare(cluster.path, registry=cluster.registry).new_ca
    assert cluster.up().changed == 0


def test_a_same_ca_rotation_gives_etcd_its_new_certificate_without_a_restart(tmp_path):
    """etcd reads its certificate anew for every connection: restarting a member would only make an election,
    which fails the reads in flight. A member run as another user restarts, to be handed the new files."""
    cluster = Cluster(tmp_path)
    cluster.up()
    rotated = up(
        prepare(cluster.path, registry=cluster.registry, rotation=Rotation(("etcd",))),
        Options(verify=False),
        connector=FakeConnector(cluster.world),
    )
    changes = {(a, x.kind, x.target) for a, xs in rotated.host_actions.items() for x in xs}
    written = {t for _, kind, t in changes if kind == "write-file"}
    assert {f"/etc/kubernetes/ssl/kube-etcd-10-0-0-{i}.pem" for i in (1, 2, 3)} <= written
    assert not [c for c in changes if c[2] == "etcd" and c[1] != "write-file"], changes
    cluster.write(THREE_NODES + "    services: {etcd: {uid: 52034, gid: 52034}}\n")
    cluster.up()
    rotated = up(
        prepare(cluster.path, registry=cluster.registry, rotation=Rotation(("etcd",))),
        Options(verify=False),
        connector=FakeConnector(cluster.world),
    )
    replaced = {
        a for a, xs in rotated.host_actions.items() for x in xs if (x.kind, x.target) == ("replace", "etcd")
    }
    assert replaced == {"10.0.0.1", "10.0.0.2", "10.0.0.3"}


def test_a_killed_rotation_finishes_on_the_next_up(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.up()
    cluster.host("10.0.0.3").docker.broken.add("kube-proxy")
    with pytest.raises(ApplyError, match=r"10\.0\.0\.3: kube-proxy: health check failed"):
        up(
            prepare(cluster.path, registry=cluster.registry, rotation=Rotation()),
            Options(verify=False),
            connector=FakeConnector(cluster.world),
        )
    state = read_state(tmp_path / "cluster.rkestate")
    assert state is not None and state.desired.certificates != state.current.certificates
    rotated = state.desired.certificates
    cluster.host("10.0.0.3").docker.broken.clear()
    cluster.up()
    state = read_state(tmp_path / "cluster.rkestate")
    assert state is not None
    assert state.current.certificates["kube-node"] == rotated["kube-node"]
    assert cluster.up().changed == 0


def test_with_a_new_ca_the_workers_change_together_and_are_not_cordoned(tmp_path):
    """A worker the new apiservers do not know yet serves nothing (and loses its pods after 5 minutes):
    rolling them one at a time would only keep the others down longer."""
    cluster = Cluster(tmp_path, FIVE_NODES)
    cluster.up()
    same_ca = up(
        prepare(cluster.path, registry=cluster.registry, rotation=Rotation()),
        OPTIONS,
        connector=FakeConnector(cluster.world),
    )
    assert "cordon" in [x.kind for x in same_ca.cluster_actions]
    new_ca = up(
        prepare(cluster.path, registry=cluster.registry, rotation=Rotation(ca=True)),
        OPTIONS,
        connector=FakeConnector(cluster.world),
    )
    assert "cordon" not in [x.kind for x in new_ca.cluster_actions]
    for address in ("10.0.0.4", "10.0.0.5"):
        kubelet = next(x for x in new_ca.host_actions[address] if x.target == "kubelet")
        assert kubelet.reason.endswith("batch 1 of 1"), kubelet.reason


def test_rotate_certificates_in_cluster_yml_rotates_in_up_and_plan_but_not_in_status(tmp_path):
    cluster = Cluster(tmp_path)
    cluster.up()
    before = read_state(tmp_path / "cluster.rkestate")
    assert before is not None
    cluster.write(THREE_NODES + "    rotate_certificates: {services: [kube-proxy]}\n")
    reading = prepare(cluster.path, registry=cluster.registry)  # status, cert list: nothing rotates
    assert reading.bundle["kube-proxy"] == before.current.certificates["kube-proxy"]
    changing = prepare(cluster.path, registry=cluster.registry, changing=True)  # up, plan
    rotated = {n for n, p in changing.bundle.items() if p != before.current.certificates[n]}
    assert rotated == {"kube-proxy"}
