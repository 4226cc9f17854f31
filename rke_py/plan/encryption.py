"""Secrets encryption at rest, as RKE sets it up (`rke:cluster/encryption.go`): an aescbc key made once and
kept in the state file (`encryptionConfig`, the file's text), the EncryptionConfiguration on every
controlplane host, and the apiserver's --encryption-provider-config. `custom_config` is written as given."""

from __future__ import annotations

import base64
import secrets
from typing import Any

from ruamel.yaml import YAML

from rke_py.config.findings import Findings
from rke_py.config.schema import ClusterConfig
from rke_py.errors import Problem
from rke_py.plan.common import host_path, to_yaml
from rke_py.plan.model import FileSpec

PATH = "/etc/kubernetes/ssl/encryption.yaml"  # RKE's EncryptionProviderFilePath
HEADER = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"


def settings(config: ClusterConfig) -> dict[str, Any]:
    return config.services.kube_api.secrets_encryption_config or {}


def enabled(config: ClusterConfig) -> bool:
    return settings(config).get("enabled") is True


def new_key() -> tuple[str, str]:
    """A key name as RKE's (`key-` and five random characters) and 32 random bytes, base64."""
    return f"key-{secrets.token_hex(3)[:5]}", base64.b64encode(secrets.token_bytes(32)).decode()


def key_file(keys: list[tuple[str, str]]) -> str:
    """aescbc with `keys` (the first encrypts, all decrypt), then identity: what is still in clear reads."""
    lines = [
        HEADER + "resources:",
        "- resources:",
        "  - secrets",
        "  providers:",
        "  - aescbc:",
        "      keys:",
    ]
    for name, secret in keys:
        lines += [f"      - name: {name}", f"        secret: {secret}"]
    return "\n".join([*lines, "  - identity: {}", ""])


def custom_file(custom: dict[str, Any]) -> str:
    rest = {key: value for key, value in custom.items() if key not in ("apiVersion", "kind")}
    return HEADER + to_yaml(rest).decode()


def aescbc_keys(text: str) -> list[tuple[str, str]]:
    """The aescbc keys of the first provider of an EncryptionConfiguration, or [] when it does not start
    with aescbc (identity first, a custom file with another provider, or no file)."""
    try:
        document = YAML(typ="safe").load(text) or {}
        first = document["resources"][0]["providers"][0]
        return [(str(k["name"]), str(k["secret"])) for k in first["aescbc"]["keys"]]
    except (KeyError, IndexError, TypeError, AttributeError):
        return []


def desired_file(config: ClusterConfig, previous: str) -> str:
    """The file this run deploys: none when off, custom_config as given, else the state's aescbc file
    (RKE's or rke-py's, taken as it is) or one with a new key."""
    if not enabled(config):
        return ""
    custom = settings(config).get("custom_config")
    if custom:
        return custom_file(custom)
    if aescbc_keys(previous):
        return previous
    return key_file([new_key()])


def problems(config: ClusterConfig, running: str, source: str) -> list[Problem]:
    """Turning encryption off on a cluster that encrypts would leave Secrets no apiserver reads."""
    if enabled(config) or not running:
        return []
    findings = Findings(source, config.positions)
    findings.error(
        ("services", "kube-api", "secrets_encryption_config"),
        "the cluster encrypts its Secrets (the state holds its encryption config): rke-py cannot turn "
        "secrets encryption off yet",
        "keep secrets_encryption_config: {enabled: true}",
    )
    return findings.errors


def files(config: ClusterConfig) -> list[FileSpec]:
    if not config.encryption_provider:
        return []
    return [FileSpec(host_path(config, PATH), config.encryption_provider.encode(), 0o600, secret=True)]


def flags(config: ClusterConfig) -> dict[str, str]:
    return {"encryption-provider-config": PATH} if config.encryption_provider else {}
