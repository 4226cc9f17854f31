"""The credentials rke-py pulls images with: each private registry's user and password, and for an ECR
registry with `ecr_credential_plugin` and no user, a token ECR hands out (RKE's `ECRCredentialPlugin`):
with the plugin's keys, or else AWS's usual chain (environment, profile, instance role), asked once a
process, per registry."""

from __future__ import annotations

import base64
import threading

from rke_py.config.schema import ClusterConfig, PrivateRegistry
from rke_py.errors import RkePyError
from rke_py.plan.registries import ecr_region, registry_auth, registry_host

_tokens: dict[tuple[str, str], dict[str, str]] = {}
_lock = threading.Lock()


class ECRError(RkePyError):
    """ECR did not hand out a pull token."""


def pull_auth(config: ClusterConfig) -> dict[str, dict[str, str]]:
    """Credentials per registry host, ECR tokens included."""
    auth = registry_auth(config)
    for registry in config.private_registries:
        if registry.ecr_credential_plugin is not None and not registry.user:
            auth[registry_host(registry.url)] = _ecr_token(registry)
    return auth


def _ecr_token(registry: PrivateRegistry) -> dict[str, str]:
    plugin = registry.ecr_credential_plugin
    assert plugin is not None
    key = (registry.url, plugin.aws_access_key_id)
    with _lock:
        if key not in _tokens:
            _tokens[key] = _ask_ecr(registry)
        return _tokens[key]


def _ask_ecr(registry: PrivateRegistry) -> dict[str, str]:
    import boto3  # only runs that pull from ECR pay for importing the AWS SDK
    from botocore.exceptions import BotoCoreError, ClientError

    plugin = registry.ecr_credential_plugin
    assert plugin is not None
    keys = (
        {
            "aws_access_key_id": plugin.aws_access_key_id,
            "aws_secret_access_key": plugin.aws_secret_access_key,
            "aws_session_token": plugin.aws_session_token or None,
        }
        if plugin.aws_access_key_id and plugin.aws_secret_access_key
        else {}
    )
    try:
        client = boto3.client("ecr", region_name=ecr_region(registry.url), **keys)
        data = client.get_authorization_token()["authorizationData"]
        user, _, password = base64.b64decode(data[0]["authorizationToken"]).decode().partition(":")
    except (BotoCoreError, ClientError, IndexError, KeyError, ValueError) as exc:
        raise ECRError(f"ECR gave no pull token for {registry.url}: {exc}") from None
    return {"username": user, "password": password}
