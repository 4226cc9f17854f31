"""Secrets encryption as RKE sets it up: the key made once and kept in the state, RKE's file on the
controlplane hosts only, the apiserver flag, every Secret rewritten once when the config is new, an RKE
state's key taken over as it is, and what the apiserver would refuse refused at its line."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from rke_py.config import load_text
from rke_py.deploy.apply import rewrite_secrets
from rke_py.deploy.desired import prepare
from rke_py.deploy.saving import save_state
from rke_py.errors import ConfigError
from rke_py.kube.api import KubeAPIError
from rke_py.plan import encryption, kube_apiserver
from rke_py.state import ClusterState, State, read_state, write_state

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
    text = encryption.desired_file(load_text(ON).config, "")
    providers = YAML(typ="safe").load(text)["resources"][0]["providers"]
    assert [next(iter(p)) for p in providers] == ["aescbc", "identity"]
    (name, secret), *rest = encryption.aescbc_keys(text)
    assert rest == [] and name.startswith("key-") and len(base64.b64decode(secret)) == 32
    assert encryption.desired_file(load_text(ON).config, "") != text  # a new key each time there is none


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


def test_turning_it_off_on_a_cluster_that_encrypts_is_refused_at_its_line(tmp_path: Path):
    path = cluster(tmp_path, ON.replace("enabled: true", "enabled: false"), RKE_FILE)
    with pytest.raises(ConfigError, match=r"cluster\.yml:6:5: the cluster encrypts its Secrets"):
        prepare(path)


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
