"""`services.kube-api.secrets_encryption_config`: what the apiserver would refuse to start with is refused
here, at its line (an apiserver that cannot read its encryption config reads no Secret)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from rke_py.config.findings import Findings, Path, excerpt
from rke_py.config.schema import ClusterConfig

BASE: Path = ("services", "kube-api", "secrets_encryption_config")
# provider -> the key sizes (bytes) the apiserver takes; None: a provider without keys of its own
PROVIDERS: dict[str, tuple[int, ...] | None] = {
    "aescbc": (16, 24, 32),
    "aesgcm": (16, 24, 32),
    "secretbox": (32,),
    "kms": None,
    "identity": None,
}


def encryption(config: ClusterConfig, findings: Findings) -> None:
    given = config.services.kube_api.secrets_encryption_config
    if given is None:
        return
    if not isinstance(given.get("enabled", False), bool):
        findings.error((*BASE, "enabled"), "secrets_encryption_config.enabled must be true or false")
    custom = given.get("custom_config")
    if custom is None:
        return
    path = (*BASE, "custom_config")
    if not isinstance(custom, dict):
        findings.error(path, "custom_config must be an EncryptionConfiguration (a mapping)")
        return
    for key, wanted in (("apiVersion", "apiserver.config.k8s.io/v1"), ("kind", "EncryptionConfiguration")):
        if custom.get(key, wanted) != wanted:
            findings.error((*path, key), f"custom_config.{key} must be {wanted}")
    resources = custom.get("resources")
    if not isinstance(resources, list) or not resources:
        findings.error(
            path, "custom_config has no resources", "list resources: [secrets] with their providers"
        )
        return
    for index, entry in enumerate(resources):
        _entry(entry, (*path, "resources", index), findings)


def _entry(entry: Any, path: Path, findings: Findings) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("resources"), list):
        findings.error(path, "each entry of custom_config.resources needs resources: [...] and providers")
        return
    providers = entry.get("providers")
    if not isinstance(providers, list) or not providers:
        findings.error(
            path, "this custom_config entry has no providers", "add e.g. aescbc, then identity: {}"
        )
        return
    for index, provider in enumerate(providers):
        where = (*path, "providers", index)
        if not isinstance(provider, dict) or len(provider) != 1 or next(iter(provider)) not in PROVIDERS:
            findings.error(
                where, "a provider is one of " + ", ".join(PROVIDERS), "e.g. aescbc: {keys: [...]}"
            )
            continue
        name, body = next(iter(provider.items()))
        sizes = PROVIDERS[name]
        if sizes is not None:
            _keys(body, sizes, (*where, name), findings)


def _keys(body: Any, sizes: tuple[int, ...], path: Path, findings: Findings) -> None:
    keys = body.get("keys") if isinstance(body, dict) else None
    if not isinstance(keys, list) or not keys:
        findings.error(path, "this provider needs keys: [{name, secret}]")
        return
    for index, key in enumerate(keys):
        where = (*path, "keys", index)
        if not isinstance(key, dict) or not key.get("name") or not isinstance(key.get("secret"), str):
            findings.error(where, "each key needs a name and a secret")
            continue
        try:
            size = len(base64.b64decode(key["secret"], validate=True))
        except (binascii.Error, ValueError):
            size = -1
        if size not in sizes:
            findings.error(
                (*where, "secret"),
                f"key {excerpt(str(key['name']))}: its secret is not base64 of "
                f"{' or '.join(map(str, sizes))} bytes",
                "make one with: head -c 32 /dev/urandom | base64",
            )
