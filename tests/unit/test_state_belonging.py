"""A local state that does not describe the running cluster (lost, damaged and made again, another
cluster's, or older than a CA rotation or an encryption key) is refused before anything is written: up
would otherwise deploy another CA or key over the cluster. A reused machine joining is not refused."""

from __future__ import annotations

import shutil

import pytest

from rke_py.deploy.belonging import STEP
from rke_py.deploy.desired import Rotation, prepare
from rke_py.deploy.up import up
from rke_py.errors import PreflightError
from rke_py.plan import encryption
from rke_py.state import read_state
from tests.unit.fakehost import FakeConnector, FakeHost
from tests.unit.test_deploy_fake import FIVE_NODES, OPTIONS, Cluster, ids

ENCRYPTED = (
    FIVE_NODES + "    services:\n      kube-api:\n        secrets_encryption_config: {enabled: true}\n"
)


def refused(cluster: Cluster) -> str:
    """up refuses, changing no host and no file beside cluster.yml: the message."""
    before, events = ids(cluster), len(cluster.world.events)
    state = cluster.path.with_suffix(".rkestate")
    kept = state.read_bytes() if state.exists() else None
    with pytest.raises(PreflightError) as refusal:
        cluster.up()
    assert ids(cluster) == before and cluster.world.events[events:] == []
    assert (state.read_bytes() if state.exists() else None) == kept
    with pytest.raises(PreflightError):
        cluster.plan()
    return str(refusal.value)


def test_a_lost_state_is_refused_and_the_message_says_how_to_get_it_back(tmp_path):
    cluster = Cluster(tmp_path, FIVE_NODES)
    cluster.up()
    cluster.path.with_suffix(".rkestate").unlink()
    message = refused(cluster)
    hosts = [line for line in message.splitlines() if STEP in line]
    assert len(hosts) == 5 and all("another CA than cluster.rkestate's" in line for line in hosts), message
    assert "rke-py util get-state-file --config" in message.splitlines()[-1]


def test_a_state_older_than_a_ca_rotation_is_refused_and_the_current_one_accepted(tmp_path):
    cluster = Cluster(tmp_path, FIVE_NODES)
    cluster.up()
    state = cluster.path.with_suffix(".rkestate")
    shutil.copy(state, tmp_path / "older")
    up(
        prepare(cluster.path, registry=cluster.registry, rotation=Rotation(ca=True)),
        OPTIONS,
        connector=FakeConnector(cluster.world),
    )
    shutil.copy(state, tmp_path / "newer")
    shutil.copy(tmp_path / "older", state)
    refused(cluster)
    shutil.copy(tmp_path / "newer", state)
    assert cluster.up().changed == 0


def test_a_state_older_than_the_encryption_key_is_refused(tmp_path):
    cluster = Cluster(tmp_path, FIVE_NODES)
    cluster.up()
    state = cluster.path.with_suffix(".rkestate")
    shutil.copy(state, tmp_path / "older")
    cluster.write(ENCRYPTED)
    cluster.up()
    key = read_state(state).current.encryption_config
    shutil.copy(tmp_path / "older", state)
    message = refused(cluster)
    assert encryption.PATH in message and "unreadable" in message
    assert {line.split(":")[0] for line in message.splitlines() if STEP in line} == {
        "10.0.0.1",
        "10.0.0.2",
        "10.0.0.3",
    }
    assert read_state(state).current.encryption_config != key


def test_a_reused_machine_joining_is_given_this_clusters_files(tmp_path):
    """A worker that ran another cluster (its CA still on disk) joins; the cluster's hosts match the state."""
    four = FIVE_NODES.replace("      - {address: 10.0.0.5, user: root, role: [worker]}\n", "")
    cluster = Cluster(tmp_path, four)
    cluster.up()
    (tmp_path / "other").mkdir()
    other = Cluster(tmp_path / "other", FIVE_NODES)
    other.up()
    cluster.write(FIVE_NODES)
    joining = FakeHost(cluster.world, other.host("10.0.0.5").node)
    joining.files = dict(other.host("10.0.0.5").files)
    ca = next(p for p in joining.files if p.endswith("kube-ca.pem"))
    assert joining.files[ca] != cluster.host("10.0.0.4").files[ca]
    cluster.up()
    assert joining.files[ca] == cluster.host("10.0.0.4").files[ca]
