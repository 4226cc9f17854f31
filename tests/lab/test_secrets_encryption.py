"""Secrets encryption turned on for a running cluster, as an RKE user does it: `secrets_encryption_config:
{enabled: true}` and `rke-py up`. The key is made once and kept in the state, the apiserver reads RKE's
encryption config, and every Secret that existed before is written anew. With real Kubernetes, the bytes
etcd holds for a Secret start with `k8s:enc:aescbc:v1:` (the lab's stand-in apiserver stores Secrets in
clear whatever its flags say, so that part needs real binaries)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from rke_py.plan.encryption import aescbc_keys
from rke_py.state import read_state
from tests.lab.e2e import edit_cluster_yml, host_exec, kubectl, own_lab, up

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
    assert host_exec(lab, 0, f"cat {FILE}") == kept
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


def test_turning_it_off_is_refused_before_any_host_is_touched(lab):
    edit_cluster_yml(
        lab, lambda data: data["services"]["kube-api"]["secrets_encryption_config"].update(enabled=False)
    )
    try:
        refused = up(lab)
    finally:
        edit_cluster_yml(lab, enable)
    assert refused.code == 2
    assert "cannot turn secrets encryption off yet" in refused.stderr
