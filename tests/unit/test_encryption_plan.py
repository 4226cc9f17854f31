"""Secrets encryption as RKE sets it up: the key made once and kept in the state, RKE's file on the
controlplane hosts only, the apiserver flag, every Secret rewritten once when the config is new, an RKE
state's key taken over as it is, and what the apiserver would refuse refused at its line."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from rke_py.config import load_text
from rke_py.deploy.apply import rewrite_secrets
from rke_py.deploy.desired import prepare
from rke_py.deploy.saving import save_state
from rke_py.deploy.up import up
from rke_py.errors import ConfigError
from rke_py.kube.api import KubeAPIError
from rke_py.plan import encryption, kube_apiserver
from rke_py.plan.common import deployed
from rke_py.state import ClusterState, State, read_state, write_state
from tests.unit.fakehost import FakeConnector
from tests.unit.test_deploy_fake import OPTIONS, THREE_NODES, Cluster

NODES = """\
nodes:
  - {address: 192.0.2.11, user: root, role: [etcd, controlplane]}
  - {address: 192.0.2.12, user: root, role: [worker]}
"""
ON = NODES + "services:\n  kube-api:\n    secrets_encryption_config:\n      enabled: true\n"
# What RKE wrote for a cluster it encrypts (its template, with its key naming)
RKE_FILE = encryption.key_file(
    [("key-x7k2m", base64.b64encode(b"0123456789ABCDEF0123456789ABCDEF").decode())]
)


def cluster(tmp_path: Path, text: str, encrypting: str = "") -> Path:
    path = tmp_path / "cluster.yml"
    path.write_text(text)
    if encrypting:
        write_state(tmp_path / "cluster.rkestate", ClusterState(current=State(encryption_config=encrypting)))
    return path


def test_a_new_key_is_32_random_bytes_under_aescbc_then_identity():
    text = encryption.desired_file(load_text(ON).config, "", "")
    providers = YAML(typ="safe").load(text)["resources"][0]["providers"]
    assert [next(iter(p)) for p in providers] == ["aescbc", "identity"]
    (name, secret), *rest = encryption.aescbc_keys(text)
    assert rest == [] and name.startswith("key-") and len(base64.b64decode(secret)) == 32
    assert encryption.desired_file(load_text(ON).config, "", "") != text  # a new key each time there is none


def test_only_controlplane_hosts_get_the_file_and_the_flag(tmp_path: Path):
    desired = prepare(cluster(tmp_path, ON))
    control, worker = desired.plan.nodes
    files = {f.path: f for f in control.files}
    assert files[encryption.PATH].mode == 0o600 and files[encryption.PATH].secret
    assert encryption.PATH not in {f.path for f in worker.files}
    flags = kube_apiserver.flags(desired.config, desired.config.nodes[0])
    assert flags["encryption-provider-config"] == encryption.PATH
    assert encryption.PATH in kube_apiserver.read_files(desired.config)  # a new key restarts the apiserver
    assert desired.rewrite_secrets


def test_an_rke_state_that_encrypts_is_taken_over_with_its_key_and_nothing_rewritten(tmp_path: Path):
    desired = prepare(cluster(tmp_path, ON, RKE_FILE))
    assert desired.config.encryption_provider == RKE_FILE
    assert not desired.rewrite_secrets


def test_the_key_is_in_the_state_before_any_host_is_touched(tmp_path: Path):
    desired = prepare(cluster(tmp_path, ON))
    save_state(desired, current=False)
    saved = read_state(tmp_path / "cluster.rkestate")
    assert saved is not None and saved.desired.encryption_config == desired.config.encryption_provider
    assert saved.current.encryption_config == ""
    again = prepare(tmp_path / "cluster.yml")  # a run killed before the hosts: the same key next time
    assert again.config.encryption_provider == desired.config.encryption_provider


def test_custom_config_is_written_as_given(tmp_path: Path):
    key = base64.b64encode(bytes(32)).decode()
    custom = (
        ON
        + "      custom_config:\n        apiVersion: apiserver.config.k8s.io/v1\n"
        + "        kind: EncryptionConfiguration\n        resources:\n          - resources: [secrets]\n"
        + f"            providers:\n              - secretbox: {{keys: [{{name: k1, secret: {key}}}]}}\n"
        + "              - identity: {}\n"
    )
    text = prepare(cluster(tmp_path, custom)).config.encryption_provider
    document = YAML(typ="safe").load(text)
    assert document["kind"] == "EncryptionConfiguration"
    assert document["resources"][0]["providers"][0] == {
        "secretbox": {"keys": [{"name": "k1", "secret": key}]}
    }


CUSTOM_IDENTITY = (
    "      custom_config:\n        resources: [{resources: [secrets], providers: [{identity: {}}]}]\n"
)


def ran(path: Path, desired) -> None:
    """The state after a run that deployed `desired` and wrote every Secret under it."""
    write_state(
        path.with_suffix(".rkestate"),
        ClusterState(current=State(encryption_config=desired.config.encryption_provider)),
    )


def providers(text: str) -> list[str]:
    return [next(iter(p)) for p in YAML(typ="safe").load(text)["resources"][0]["providers"]]


def test_turning_it_off_puts_identity_first_then_removes_the_file(tmp_path: Path):
    path = cluster(tmp_path, ON.replace("enabled: true", "enabled: false"), RKE_FILE)
    first = prepare(path)
    assert providers(first.config.encryption_provider) == ["identity", "aescbc"]
    assert encryption.aescbc_keys(RKE_FILE)[0] in [
        (k["name"], k["secret"])
        for k in YAML(typ="safe").load(first.config.encryption_provider)["resources"][0]["providers"][1][
            "aescbc"
        ]["keys"]
    ]  # what is encrypted still reads while it is written anew in clear
    assert first.rewrite_secrets and first.encryption_staged
    ran(path, first)
    second = prepare(path)
    assert second.config.encryption_provider == ""
    assert not second.rewrite_secrets and not second.encryption_staged
    assert "encryption-provider-config" not in kube_apiserver.flags(second.config, second.config.nodes[0])


def test_a_new_key_goes_first_then_the_old_one_is_dropped(tmp_path: Path):
    path = cluster(tmp_path, ON, RKE_FILE)
    old = encryption.aescbc_keys(RKE_FILE)
    first = prepare(path, rotate_key=True)
    keys = encryption.aescbc_keys(first.config.encryption_provider)
    assert keys[1:] == old and keys[0] not in old
    assert first.rewrite_secrets and first.encryption_staged
    ran(path, first)
    second = prepare(path)
    assert encryption.aescbc_keys(second.config.encryption_provider) == keys[:1]
    assert not second.rewrite_secrets  # every Secret is under the new key already
    assert not second.encryption_staged


def test_a_killed_first_stage_is_finished_before_anything_else(tmp_path: Path):
    path = cluster(tmp_path, ON, RKE_FILE)
    first = prepare(path, rotate_key=True)
    save_state(first, current=False)  # killed before the Secrets were all written
    again = prepare(path)
    assert again.config.encryption_provider == first.config.encryption_provider
    assert again.rewrite_secrets


@pytest.mark.parametrize(
    ("text", "running", "problem"),
    [
        (ON, "", r"cluster\.yml:6:5: the cluster does not encrypt its Secrets with an aescbc key"),
        (
            ON + CUSTOM_IDENTITY,
            RKE_FILE,
            r"cluster\.yml:8:7: the keys of a custom_config are the ones cluster.yml gives",
        ),
    ],
)
def test_rotating_a_key_needs_rke_pys_own_running(tmp_path: Path, text: str, running: str, problem: str):
    path = cluster(tmp_path, text, running)
    with pytest.raises(ConfigError, match=problem):
        prepare(path, rotate_key=True)


@pytest.mark.parametrize(
    ("custom", "problem"),
    [
        ("resources: []", "custom_config has no resources"),
        ("resources: [{resources: [secrets], providers: [{rot13: {}}]}]", "a provider is one of"),
        (
            "resources: [{resources: [secrets], providers: [{aescbc: {keys: [{name: k, secret: c2hv}]}}]}]",
            "key k: its secret is not base64 of 16 or 24 or 32 bytes",
        ),
        (
            "kind: Policy\n        resources: [{resources: [secrets], providers: [{identity: {}}]}]",
            "kind must be",
        ),
    ],
)
def test_a_custom_config_the_apiserver_would_refuse_is_refused_here(custom: str, problem: str):
    with pytest.raises(ConfigError, match=problem):
        load_text(ON + f"      custom_config:\n        {custom}\n")


class FakeSecrets:
    """The Secrets API rewrite_secrets talks to: pages, and one Secret changed or gone meanwhile."""

    def __init__(self, names: list[str]):
        self.names = names
        self.puts: list[str] = []
        self.changed, self.gone = "s1", "s2"

    def get(self, path: str) -> Any:
        if "/namespaces/" in path:
            meta = {"name": path.rsplit("/", 1)[1], "namespace": "default", "resourceVersion": "9"}
            return {"apiVersion": "v1", "kind": "Secret", "metadata": meta}
        start = int(path.split("continue=")[1]) if "continue=" in path else 0
        items = [{"metadata": {"name": n, "namespace": "default"}} for n in self.names[start : start + 2]]
        more = start + 2 < len(self.names)
        return {"items": items, "metadata": {"continue": str(start + 2) if more else ""}}

    def request(self, method: str, path: str, body: Any = None) -> Any:
        name = path.rsplit("/", 1)[1]
        if name == self.gone:
            raise KubeAPIError("gone", 404)
        if name == self.changed and "resourceVersion" not in body["metadata"]:
            raise KubeAPIError("conflict", 409)
        assert body["kind"] == "Secret" and body["apiVersion"] == "v1"
        self.puts.append(name)


def test_every_secret_is_written_back_page_by_page():
    api = FakeSecrets(["s0", "s1", "s2", "s3", "s4"])
    assert rewrite_secrets(api, batch=2) == 4  # type: ignore[arg-type]
    assert api.puts == ["s0", "s1", "s3", "s4"]


def test_one_up_runs_both_stages_of_a_key_rotation(tmp_path: Path):
    on = "    services: {kube-api: {secrets_encryption_config: {enabled: true}}}\n"
    cluster = Cluster(tmp_path, THREE_NODES + on)
    cluster.up()
    state = tmp_path / "cluster.rkestate"

    def running() -> str:
        saved = read_state(state)
        assert saved is not None
        return saved.current.encryption_config

    old = encryption.aescbc_keys(running())
    mark = len(cluster.world.events)
    rotating = prepare(cluster.path, registry=cluster.registry, rotate_key=True)
    result = up(rotating, OPTIONS, connector=FakeConnector(cluster.world))
    keys = encryption.aescbc_keys(running())
    assert len(keys) == 1 and keys != old
    assert [x.kind for x in result.cluster_actions].count("rewrite") == 1
    started = [e for e in cluster.world.events[mark:] if e.endswith("start kube-apiserver")]
    assert len(started) == 6  # every apiserver replaced for each stage
    written = hashlib.sha256(deployed(running())).hexdigest()  # as RKE's file-deployer writes it
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        assert cluster.host(address).files[encryption.PATH] == (written, 0o600)
    assert cluster.up().changed == 0


def test_rotate_encryption_key_in_cluster_yml_rotates_in_up_only_once_the_cluster_encrypts(tmp_path: Path):
    text = ON + "rotate_encryption_key: true\n"
    first = prepare(cluster(tmp_path, text), changing=True).config.encryption_provider or ""
    assert len(encryption.aescbc_keys(first)) == 1  # a first key: nothing to rotate yet
    path = cluster(tmp_path, text, RKE_FILE)
    assert prepare(path).config.encryption_provider == RKE_FILE
    keys = encryption.aescbc_keys(prepare(path, changing=True).config.encryption_provider)
    assert keys[1:] == encryption.aescbc_keys(RKE_FILE) and len(keys) == 2
