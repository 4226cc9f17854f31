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
from rke_py.plan.common import deployed, host_path, to_yaml
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


def first_provider(text: str) -> Any:
    """The provider that writes (the first of the first resource), None without a file."""
    try:
        return (YAML(typ="safe").load(text) or {})["resources"][0]["providers"][0]
    except (KeyError, IndexError, TypeError, AttributeError):
        return None


def decrypting(text: str) -> str:
    """`text` with identity first: Secrets are written in clear and what is encrypted still reads."""
    document = YAML(typ="safe").load(text)
    for resource in document["resources"]:
        providers = [p for p in resource["providers"] if "identity" not in p]
        resource["providers"] = [{"identity": {}}, *providers]
    return HEADER + to_yaml({"resources": document["resources"]}).decode()


def desired_file(config: ClusterConfig, previous: str, running: str, *, rotate: bool = False) -> str | None:
    """The file this run deploys. `previous` is the last one planned (a killed run's is finished first),
    `running` the one the cluster runs with every Secret written under it.

    Changes that would leave a Secret unreadable go in two stages, each a run of `up`, every Secret written
    anew in between (RKE's way): a new key is added first and the old ones dropped once every Secret uses
    it (`rotate`); encryption is turned off by putting identity first, then emptying the file. Otherwise:
    custom_config as given, the state's aescbc file (RKE's or rke-py's, taken as it is), or a new key.
    None: no file; "": the file emptied, as RKE leaves it once encryption is off (no key stays on disk)."""
    if not enabled(config):
        if not previous:
            return None
        if first_provider(previous) == {"identity": {}}:
            return "" if previous == running else previous
        return decrypting(previous)
    custom = settings(config).get("custom_config")
    if custom:
        return custom_file(custom)
    keys = aescbc_keys(previous)
    if not keys:
        return key_file([new_key()])
    if rotate:
        return key_file([new_key(), *aescbc_keys(running)])
    if previous == running and len(keys) > 1:
        return key_file(keys[:1])
    return previous


def writer(text: str) -> Any:
    """What writes Secrets under `text`: the first provider, and of its keys only the first (the others
    only read)."""
    provider = first_provider(text)
    if isinstance(provider, dict) and len(provider) == 1:
        kind, body = next(iter(provider.items()))
        keys = body.get("keys") if isinstance(body, dict) else None
        if isinstance(keys, list) and keys:
            return kind, keys[0]
    return provider


def rewrites(new: str, running: str) -> bool:
    """Whether the Secrets must be written anew: what writes them changes."""
    return bool(new) and writer(new) != writer(running)


def staged(config: ClusterConfig, new: str) -> bool:
    """Whether `new` is the first of two stages: once it runs, the next run changes the file again."""
    return bool(new) and desired_file(config, new, new) not in (new, None)


def rotation_problems(config: ClusterConfig, running: str, source: str) -> list[Problem]:
    """What a key rotation needs: rke-py's own aescbc key, running."""
    findings = Findings(source, config.positions)
    where = ("services", "kube-api", "secrets_encryption_config")
    if not enabled(config) or not aescbc_keys(running):
        findings.error(
            where,
            "the cluster does not encrypt its Secrets with an aescbc key: there is no key to rotate",
            "set secrets_encryption_config: {enabled: true} and run `rke-py up` first",
        )
    elif settings(config).get("custom_config"):
        findings.error(
            (*where, "custom_config"),
            "the keys of a custom_config are the ones cluster.yml gives: rke-py does not rotate them",
            "put a new key first in custom_config, run `rke-py up`, then remove the old one",
        )
    return findings.errors


def files(config: ClusterConfig) -> list[FileSpec]:
    if config.encryption_provider is None:
        return []
    # Turned off, the file is emptied: RKE's file-deployer removes it, and an empty file holds no key either.
    content = deployed(config.encryption_provider) if config.encryption_provider else b""
    return [FileSpec(host_path(config, PATH), content, 0o600, secret=True)]


def flags(config: ClusterConfig) -> dict[str, str]:
    return {"encryption-provider-config": PATH} if config.encryption_provider else {}
