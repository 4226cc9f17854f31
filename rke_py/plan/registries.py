"""`private_registries` as the hosts use them: which registry an image comes from, the credentials rke-py
pulls with, and the Docker config the kubelet gets so that pods can pull from the same registries."""

from __future__ import annotations

import base64
import json
import re

from rke_py.config.schema import ClusterConfig


def registry_of(image: str) -> str:
    """The registry host an image reference names (Docker's rule: a first part with '.' or ':')."""
    first, sep, _ = image.partition("/")
    return first if sep and ("." in first or ":" in first or first == "localhost") else "docker.io"


# RKE's pattern for ECR: <account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn]
ECR_HOST = re.compile(
    r"[a-zA-Z0-9][a-zA-Z0-9-_]*\.dkr\.ecr(-fips)?\.([a-zA-Z0-9][a-zA-Z0-9-_]*)\.amazonaws\.com(\.cn)?\Z"
)


def ecr_region(url: str) -> str | None:
    """The AWS region an ECR registry's host names, or None when it is not an ECR host."""
    match = ECR_HOST.match(registry_host(url))
    return match.group(2) if match else None


def registry_host(url: str) -> str:
    """The host a registry url names (an empty url is Docker Hub, as in RKE)."""
    return url.split("://")[-1].split("/")[0] or "docker.io"


def registry_auth(config: ClusterConfig) -> dict[str, dict[str, str]]:
    """Credentials per registry host, as pulls look them up."""
    return {
        registry_host(r.url): {"username": r.user, "password": r.password}
        for r in config.private_registries
        if r.user
    }


def kubelet_docker_config(config: ClusterConfig) -> str:
    """RKE's RKE_KUBELET_DOCKER_CONFIG (`docker.GetKubeletDockerConfig`): a Docker config.json with every
    private registry, credentials or not (an empty `user:password` then), base64 encoded, byte for byte as
    Go's json.Marshal writes it, so the kubelet's env is RKE's; rke-tools' entrypoint writes it where the
    kubelet looks (`/var/lib/kubelet/config.json`). Empty when cluster.yml lists no registry."""
    auths = {
        r.url: {"auth": base64.b64encode(f"{r.user}:{r.password}".encode()).decode()}
        for r in config.private_registries
        if r.ecr_credential_plugin is None
    }
    # An ECR registry is left to Docker's ecr-login credential helper.
    helpers = {r.url: "ecr-login" for r in config.private_registries if r.ecr_credential_plugin is not None}
    document = {key: value for key, value in (("auths", auths), ("credHelpers", helpers)) if value}
    if not document:
        return ""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return base64.b64encode(text.encode()).decode()
