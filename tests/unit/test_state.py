"""cluster.rkestate: RKE's JSON shape, round trips, RKE-written files, and private atomic writes."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import rke_py.files
from rke_py.config import load
from rke_py.config.schema import BackupConfig, ClusterConfig, Node, Taint
from rke_py.files import write_private_file
from rke_py.pki import build_bundle
from rke_py.state import (
    ClusterState,
    State,
    StateError,
    kubeconfig_path_for,
    nodes_from_rke_json,
    read_state,
    rke_config_json,
    state_path_for,
    write_state,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"
RKE_STATE = FIXTURES / "state" / "rke-format.rkestate"  # RKE v1.6's layout, field for field
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def _config() -> ClusterConfig:
    config = ClusterConfig(
        nodes=[
            Node(
                address="1.1.1.1",
                internal_address="192.168.1.5",
                hostname_override="server1",
                role=["controlplane", "etcd", "worker"],
                user="rke",
                labels={"topology.kubernetes.io/zone": "a", "team_name": "infra"},
                taints=[Taint("dedicated", "etcd", "NoSchedule")],
            )
        ],
        cluster_name="local",
        prefix_path="/",
        ignore_docker_version=False,
    )
    config.services.kube_api.service_cluster_ip_range = "10.43.0.0/16"
    config.services.kubelet.cluster_domain = "cluster.local"
    config.services.etcd.backup_config = BackupConfig(
        enabled=True, interval_hours=6, s3backupconfig={"bucket_name": "snaps", "access_key": "AK"}
    )
    config.system_images.calico_flexvol = "rancher/flexvol:1"
    return config


@pytest.fixture(scope="module")
def state() -> ClusterState:
    config = _config()
    bundle = build_bundle(config)
    return ClusterState(
        desired=State(rke_config_json(config), bundle, "kind: EncryptionConfiguration\n"),
        current=State(rke_config_json(config), bundle),
        host_keys={"1.1.1.1:22": HOST_KEY},
        etcd_members_added=["etcd-server1"],
    )


def test_round_trip_keeps_everything(tmp_path, state):
    path = tmp_path / "cluster.rkestate"
    write_state(path, state)
    back = read_state(path)
    assert back.desired.rke_config == state.desired.rke_config
    assert back.desired.encryption_config == state.desired.encryption_config
    assert back.host_keys == state.host_keys
    assert back.etcd_members_added == state.etcd_members_added
    for side in ("desired", "current"):
        got = {n: (p.cert_pem, p.key_pem) for n, p in getattr(back, side).certificates.items()}
        assert got == {n: (p.cert_pem, p.key_pem) for n, p in getattr(state, side).certificates.items()}


def test_file_is_rkes_full_state_json(tmp_path, state):
    path = tmp_path / "cluster.rkestate"
    write_state(path, state)
    text = path.read_text()
    assert text.startswith('{\n  "desiredState": {\n    "rkeConfig": {')
    doc = json.loads(text)
    assert set(doc) == {"desiredState", "currentState", "rkePy"}
    assert doc["rkePy"] == {"hostKeys": {"1.1.1.1:22": HOST_KEY}, "etcdMembersAdded": ["etcd-server1"]}
    assert doc["desiredState"]["encryptionConfig"] == "kind: EncryptionConfiguration\n"
    node = doc["desiredState"]["certificatesBundle"]["kube-node"]
    assert node == {
        "certificatePEM": state.desired.certificates["kube-node"].cert_pem,
        "keyPEM": state.desired.certificates["kube-node"].key_pem,
        "config": node["config"],
        "name": "kube-node",
        "commonName": "system:node",
        "ouName": "system:nodes",
        "envName": "KUBE_NODE",
        "path": "/etc/kubernetes/ssl/kube-node.pem",
        "keyEnvName": "KUBE_NODE_KEY",
        "keyPath": "/etc/kubernetes/ssl/kube-node-key.pem",
        "configEnvName": "KUBECFG_KUBE_NODE",
        "configPath": "/etc/kubernetes/ssl/kubecfg-kube-node.yaml",
    }
    assert 'user: "kube-node-local"' in node["config"]
    etcd = doc["desiredState"]["certificatesBundle"]["kube-etcd-192-168-1-5"]
    assert (etcd["envName"], etcd["config"], etcd["configPath"]) == ("KUBE_ETCD_192_168_1_5", "", "")
    assert doc["desiredState"]["certificatesBundle"]["kube-ca"]["commonName"] == "system:kube-ca"


@pytest.mark.parametrize("odd", [2**70, "naïve \u2028 \x1f tab\t", -(2**63), [], {}])
def test_any_value_a_users_yaml_gives_is_written_and_read_back(tmp_path, odd):
    """Whatever cluster.yml's custom objects hold (an integer beyond 64 bits, control characters) is
    written, two spaces deep as RKE writes it, and read back unchanged."""
    path = tmp_path / "cluster.rkestate"
    write_state(path, ClusterState(desired=State({"addonsInclude": [{"value": odd}]}, {})))
    assert '\n      "addonsInclude": [\n        {\n          "value": ' in path.read_text()
    assert read_state(path).desired.rke_config == {"addonsInclude": [{"value": odd}]}


def test_rke_config_uses_rkes_json_names():
    doc = rke_config_json(_config())
    node = doc["nodes"][0]
    assert node["internalAddress"] == "192.168.1.5"
    assert node["hostnameOverride"] == "server1"
    assert node["labels"] == {"topology.kubernetes.io/zone": "a", "team_name": "infra"}  # user keys untouched
    assert node["taints"] == [{"key": "dedicated", "value": "etcd", "effect": "NoSchedule"}]
    assert doc["services"]["kubeApi"]["serviceClusterIpRange"] == "10.43.0.0/16"
    assert doc["services"]["kubelet"]["clusterDomain"] == "cluster.local"
    assert doc["services"]["etcd"]["backupConfig"] == {
        "enabled": True,
        "intervalHours": 6,
        "s3BackupConfig": {"bucketName": "snaps", "accessKey": "AK"},
    }
    assert doc["systemImages"] == {"calicoFlexVol": "rancher/flexvol:1"}
    assert doc["ignoreDockerVersion"] is False  # a pointer in RKE: an explicit false is kept
    assert "sshKey" not in node and "bastionHost" not in doc  # empty values are left out, like omitempty


def test_rke_config_of_a_loaded_cluster_yml():
    doc = rke_config_json(load(FIXTURES / "config" / "rke_config_full.yml").config)
    assert [n["address"] for n in doc["nodes"]] == ["192.0.2.11", "192.0.2.12", "192.0.2.13"]
    assert doc["services"]["kubeController"]["clusterCidr"] == "10.42.0.0/16"
    assert doc["network"]["options"]["canal_flannel_backend_type"] == "vxlan"
    assert "positions" not in doc and "source" not in doc
    json.dumps(doc)  # plain JSON data all the way down


def test_reads_a_state_written_by_rke():
    state = read_state(RKE_STATE)
    assert state.host_keys == {} and state.etcd_members_added == []
    bundle = state.desired.certificates
    assert set(bundle) == {
        "kube-admin",
        "kube-apiserver",
        "kube-ca",
        "kube-etcd-192-168-1-5",
        "kube-node",
        "kube-service-account-token",
    }
    assert bundle["kube-node"].common_name == "system:node"
    assert state.desired.rke_config["clusterName"] == "local"
    nodes = nodes_from_rke_json(state.current.rke_config)
    assert [(n.address, n.internal_address, n.hostname_override, n.role) for n in nodes] == [
        ("1.1.1.1", "192.168.1.5", "server1", ["controlplane", "etcd", "worker"])
    ]


def test_an_rke_bundle_is_completed_not_replaced(state):
    rke = read_state(RKE_STATE).desired.certificates
    config = _config()
    bundle = build_bundle(config, rke)
    for name, pair in rke.items():
        assert bundle[name].cert_pem == pair.cert_pem, name
    assert {"kube-apiserver-requestheader-ca", "kube-apiserver-proxy-client", "kube-scheduler"} <= set(bundle)


def test_rewriting_an_rke_state_keeps_fields_rke_py_does_not_model(tmp_path):
    state = read_state(RKE_STATE)
    path = tmp_path / "cluster.rkestate"
    write_state(path, state)
    doc = json.loads(path.read_text())
    original = json.loads(RKE_STATE.read_text())
    assert doc["desiredState"]["rkeConfig"] == original["desiredState"]["rkeConfig"]
    assert "rkePy" not in doc


def test_no_state_yet_is_none(tmp_path):
    assert read_state(tmp_path / "cluster.rkestate") is None


@pytest.mark.parametrize(
    ("text", "what"), [('{"desiredState": ', "not valid JSON"), ("", "empty"), ("\n", "empty")]
)
def test_a_damaged_state_is_an_error_naming_the_file_and_the_way_back(tmp_path, text, what):
    """Truncated or emptied (a full disk, a copy cut off): exit 2, and the cluster's own copy named."""
    path = tmp_path / "cluster.rkestate"
    path.write_text(text)
    with pytest.raises(StateError, match=rf"cluster\.rkestate: {what}") as damaged:
        read_state(path)
    assert "rke-py util get-state-file" in str(damaged.value)
    assert damaged.value.exit_status == 2


def test_state_is_written_private_and_atomically(tmp_path, state):
    path = tmp_path / "cluster.rkestate"
    path.write_text("old")
    path.chmod(0o644)
    write_state(path, state)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.rkestate"]


def test_private_file_is_never_readable_by_others(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append(stat.S_IMODE(os.stat(src).st_mode))
        real_replace(src, dst)

    monkeypatch.setattr(rke_py.files.os, "replace", spy)
    old_umask = os.umask(0)
    try:
        write_private_file(tmp_path / "kube_config_cluster.yml", "secret")
    finally:
        os.umask(old_umask)
    assert seen == [0o600]
    assert (tmp_path / "kube_config_cluster.yml").read_text() == "secret"


def test_a_failed_write_leaves_the_old_file_and_no_debris(tmp_path):
    target = tmp_path / "taken"
    target.mkdir()  # os.replace cannot put a file over a directory
    with pytest.raises(OSError):
        write_private_file(target, "data")
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]


@pytest.mark.parametrize(
    ("config", "state", "kubeconfig"),
    [
        ("cluster.yml", "cluster.rkestate", "kube_config_cluster.yml"),
        ("/etc/rke/prod.yaml", "/etc/rke/prod.rkestate", "/etc/rke/kube_config_prod.yaml"),
        ("conf/my.cluster.yml", "conf/my.cluster.rkestate", "conf/kube_config_my.cluster.yml"),
    ],
)
def test_paths_next_to_the_config(config, state, kubeconfig):
    assert state_path_for(config) == Path(state)
    assert kubeconfig_path_for(config) == Path(kubeconfig)
