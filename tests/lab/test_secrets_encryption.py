"""Secrets encryption on a running cluster, as an RKE user does it: turned on with
`secrets_encryption_config: {enabled: true}` and `rke-py up` (the key made once and kept in the state, every
Secret written anew), its key replaced with `rke-py encrypt rotate-key`, a snapshot taken under the old key
restored, then turned off again. With real Kubernetes, the bytes etcd holds for a Secret show each step:
`k8s:enc:aescbc:v1:<key>:`, then the new key's name, the old key's again after the restore, then clear text
(the lab's stand-in apiserver stores Secrets in clear whatever its flags say, so those parts need real
binaries)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from rke_py.plan.encryption import aescbc_keys
from rke_py.state import read_state
from tests.lab.e2e import cluster_args, edit_cluster_yml, host_exec, kubectl, own_lab, rke_py, up

pytestmark = pytest.mark.lab

FILE = "/etc/kubernetes/ssl/encryption.yaml"


def enable(data) -> None:
    data.setdefault("services", {}).setdefault("kube-api", {})["secrets_encryption_config"] = {
        "enabled": True
    }


def secret(lab, name: str) -> dict:
    return json.loads(kubectl(lab, "get", "secret", name, "-o", "json"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    with own_lab(tmp_path_factory, "encrypt", 1) as made:
        first = up(made)
        assert first.code == 0, first.stderr
        kubectl(made, "create", "secret", "generic", "before", "--from-literal=password=before-value")
        made.before_version = int(secret(made, "before")["metadata"]["resourceVersion"])
        edit_cluster_yml(made, enable)
        made.enabling = up(made)
        yield made


def state(lab):
    return read_state(Path(lab.cluster_yml).with_suffix(".rkestate"))


def test_up_turns_it_on_and_plans_the_rewrite(lab):
    assert lab.enabling.code == 0, lab.enabling.stderr
    planned = [(a["kind"], a["target"]) for a in lab.enabling.json()["cluster"]]
    assert ("rewrite", "every secret") in planned, planned


def test_the_apiservers_read_the_key_the_state_keeps(lab):
    kept = state(lab).current.encryption_config
    assert aescbc_keys(kept), kept
    assert host_exec(lab, 0, f"cat {FILE}") == kept + "\n"  # with the newline of RKE's file-deployer
    assert host_exec(lab, 0, f"stat -c %a {FILE}").strip() == "600"
    assert f"--encryption-provider-config={FILE}" in host_exec(lab, 0, "docker inspect kube-apiserver")


def test_a_secret_from_before_was_written_anew_and_reads_back(lab):
    before = secret(lab, "before")
    assert int(before["metadata"]["resourceVersion"]) > lab.before_version
    assert base64.b64decode(before["data"]["password"]) == b"before-value"


@pytest.mark.real_kubernetes
def test_etcd_holds_secrets_encrypted_with_that_key(lab):
    kubectl(lab, "create", "secret", "generic", "after", "--from-literal=password=after-value")
    name = aescbc_keys(state(lab).current.encryption_config)[0][0]
    for key in ("before", "after"):
        stored = host_exec(
            lab, 0, f"docker exec etcd etcdctl get /registry/secrets/default/{key} --print-value-only"
        )
        assert stored.startswith(f"k8s:enc:aescbc:v1:{name}:"), stored[:60]
        assert f"{key}-value" not in stored


def test_a_second_up_keeps_the_key_and_changes_nothing(lab):
    key = state(lab).current.encryption_config
    again = up(lab)
    assert again.code == 0, again.stderr
    assert again.json()["changed"] == 0
    assert state(lab).current.encryption_config == key


def test_a_snapshot_taken_while_encrypted_keeps_the_key_it_needs(lab):
    """The archive holds the state, so a restore gets the key the snapshot's Secrets are stored under."""
    saved = rke_py("etcd", "snapshot-save", "--name", "encrypted", *cluster_args(lab, "--output", "json"))
    assert saved.code == 0, saved.stderr
    lab.snapshot_key = state(lab).current.encryption_config
    assert aescbc_keys(lab.snapshot_key)


def test_rotate_key_puts_a_new_key_first_rewrites_every_secret_and_drops_the_old(lab):
    old = aescbc_keys(state(lab).current.encryption_config)
    version = int(secret(lab, "before")["metadata"]["resourceVersion"])
    run = rke_py("encrypt", "rotate-key", *cluster_args(lab, "--output", "json"))
    assert run.code == 0, run.stderr
    kept = state(lab).current.encryption_config
    keys = aescbc_keys(kept)
    assert len(keys) == 1 and keys[0] not in old, (keys, old)
    assert host_exec(lab, 0, f"cat {FILE}") == kept + "\n"  # with the newline of RKE's file-deployer
    rewrites = [a for a in run.json()["cluster"] if a["kind"] == "rewrite"]
    assert len(rewrites) == 1, run.json()["cluster"]  # under the new key; dropping the old needs none
    assert "a second run takes the old one out" in run.stderr
    after = secret(lab, "before")
    assert int(after["metadata"]["resourceVersion"]) > version
    assert base64.b64decode(after["data"]["password"]) == b"before-value"


@pytest.mark.real_kubernetes
def test_etcd_holds_every_secret_under_the_new_key(lab):
    name = aescbc_keys(state(lab).current.encryption_config)[0][0]
    for key in ("before", "after"):
        stored = host_exec(
            lab, 0, f"docker exec etcd etcdctl get /registry/secrets/default/{key} --print-value-only"
        )
        assert stored.startswith(f"k8s:enc:aescbc:v1:{name}:"), stored[:60]


def test_restoring_a_snapshot_from_before_the_rotation_brings_back_its_key_and_secrets(lab):
    """Its Secrets are stored under the old key, which the running cluster no longer has: the restore must
    deploy the key from the snapshot's state, or the apiservers read none of them."""
    kubectl(lab, "create", "secret", "generic", "after-snapshot", "--from-literal=password=gone")
    run = rke_py(
        "etcd", "snapshot-restore", "--name", "encrypted", "--force", *cluster_args(lab, "--output", "json")
    )
    assert run.code == 0, run.stderr
    assert run.json()["ok"] is True, run.json()["verify"]
    assert state(lab).current.encryption_config == lab.snapshot_key
    assert host_exec(lab, 0, f"cat {FILE}") == lab.snapshot_key + "\n"
    assert base64.b64decode(secret(lab, "before")["data"]["password"]) == b"before-value"
    assert "secret/after-snapshot" not in kubectl(lab, "get", "secrets", "-o", "name").split()
    assert up(lab, "--no-verify").json()["changed"] == 0


@pytest.mark.real_kubernetes
def test_etcd_still_holds_the_restored_secrets_under_the_snapshots_key(lab):
    name = aescbc_keys(lab.snapshot_key)[0][0]
    stored = host_exec(
        lab, 0, "docker exec etcd etcdctl get /registry/secrets/default/before --print-value-only"
    )
    assert stored.startswith(f"k8s:enc:aescbc:v1:{name}:"), stored[:60]


def test_turning_it_off_writes_every_secret_in_clear_then_removes_the_config(lab):
    edit_cluster_yml(
        lab, lambda d: d["services"]["kube-api"]["secrets_encryption_config"].update(enabled=False)
    )
    run = up(lab)
    assert run.code == 0, run.stderr
    assert state(lab).current.encryption_config == ""
    assert "--encryption-provider-config" not in host_exec(lab, 0, "docker inspect kube-apiserver")
    assert host_exec(lab, 0, f"stat -c %s {FILE}").strip() == "0"  # emptied: no key on disk (RKE removes it)
    assert base64.b64decode(secret(lab, "before")["data"]["password"]) == b"before-value"
    assert up(lab, "--no-verify").json()["changed"] == 0


@pytest.mark.real_kubernetes
def test_etcd_holds_secrets_in_clear_again(lab):
    stored = host_exec(
        lab, 0, "docker exec etcd etcdctl get /registry/secrets/default/before --print-value-only"
    )
    assert not stored.startswith("k8s:enc:") and "before-value" in stored
