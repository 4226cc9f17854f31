"""RKE keys that were read and dropped: each now changes what runs, or says at its line why it cannot."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rke_py.config import load_text
from rke_py.errors import ConfigError
from rke_py.pki.bundle import build_bundle
from rke_py.plan import build_plan
from rke_py.plan.model import ContainerSpec
from rke_py.snapshots.archive import default_name

NODES = """\
nodes:
- {address: 10.0.0.1, user: root, role: [etcd, controlplane, worker]}
"""


def spec(extra: str, name: str) -> ContainerSpec:
    config = load_text(NODES + extra).config
    plan = build_plan(config, build_bundle(config))
    return next(p.spec for p in plan.nodes[0].placed if p.spec.name == name)


def warnings(extra: str) -> list[str]:
    return [str(w) for w in load_text(NODES + extra).warnings]


def test_etcd_runs_as_its_uid_and_gid_with_its_data_and_key_handed_over() -> None:
    etcd = spec("services:\n  etcd: {uid: 52034, gid: 52035}\n", "etcd")
    assert etcd.user == "52034:52035"  # RKE writes uid:uid; the gid given is the one meant
    assert "chown -R 52034:52035 /var/lib/etcd" in etcd.prepare
    assert "chown 52034:52035 /etc/kubernetes/ssl/kube-etcd-10-0-0-1.pem" in etcd.prepare
    assert "chmod 700 /var/lib/etcd" in etcd.prepare
    plain = spec("", "etcd")
    assert (plain.user, plain.prepare) == ("", "")
    assert etcd.spec_hash() != plain.spec_hash()  # a change of owner replaces etcd, running prepare again


def test_one_of_uid_and_gid_alone_warns_that_etcd_stays_root() -> None:
    (message,) = warnings("services:\n  etcd: {uid: 52034}\n")
    assert message.startswith("cluster.yml:4:10: warning: etcd runs as root unless both uid and gid are set")


def test_the_cri_dockerd_stream_server_reaches_the_kubelet_entrypoint() -> None:
    given = "cri_dockerd_stream_server_address: 0.0.0.0\ncri_dockerd_stream_server_port: '10020'\n"
    env = spec(given, "kubelet").env
    assert "CRIDOCKERD_STREAM_SERVER_ADDRESS=0.0.0.0" in env and "CRIDOCKERD_STREAM_SERVER_PORT=10020" in env
    assert not any(e.startswith("CRIDOCKERD_STREAM") for e in spec("", "kubelet").env)


def test_a_stream_server_port_that_is_not_a_port_is_refused_at_its_line() -> None:
    with pytest.raises(ConfigError) as err:
        load_text(NODES + "cri_dockerd_stream_server_port: '70000'\n")
    assert str(err.value).startswith('cluster.yml:3:1: cri_dockerd_stream_server_port "70000" is not a port')


def test_br_netfilter_is_loaded_before_kube_proxy_when_asked() -> None:
    assert (
        "RKE_KUBE_PROXY_BR_NETFILTER=true" in spec("network: {enable_br_netfilter: true}\n", "kube-proxy").env
    )
    assert "RKE_KUBE_PROXY_BR_NETFILTER=true" not in spec("", "kube-proxy").env


def test_safe_timestamp_names_have_no_colons() -> None:
    moment = datetime(2026, 11, 25, 6, 25, 1, tzinfo=UTC)
    assert default_name(moment) == "rke_etcd_snapshot_2026-11-25T06:25:01Z"
    assert default_name(moment, safe=True) == "rke_etcd_snapshot_2026-11-25T06-25-01Z"


def test_calico_cloud_provider_says_it_changes_nothing() -> None:
    given = "network:\n  plugin: calico\n  calico_network_provider: {cloud_provider: aws}\n"
    (message,) = warnings(given)
    assert message.startswith('cluster.yml:5:29: warning: calico cloud_provider "aws" changes nothing')
    assert warnings("network:\n  plugin: calico\n  calico_network_provider: {cloud_provider: none}\n") == []
