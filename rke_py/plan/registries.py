"""`private_registries` as the hosts use them: which registry an image comes from, the credentials rke-py
pulls with, and the Docker config the kubelet gets so that pods can pull from the same registries."""

from __future__ import annotations

import base64
import json

from rke_py.config.schema import ClusterConfig


def registry_of(image: str) -> str:
    """The registry host an image reference names (Docker's rule: a first part with '.' or ':')."""
    first, sep, _ = image.partition("/")
    return first if sep and ("." in first or ":" in first or first == "localhost") else "docker.io"


def registry_auth(config: ClusterConfig) -> dict[str, dict[str, str]]:
    """Credentials per registry host, as pulls look them up (an empty url is Docker Hub, as in RKE)."""
    return {
        (r.url.split("://")[-1].split("/")[0] or "docker.io"): {"username": r.user, "password": r.password}
        for r in config.private_registries
        if r.user
    }


def kubelet_docker_config(config: ClusterConfig) -> str:
    """RKE's RKE_KUBELET_DOCKER_CONFIG: a Docker config.json with every registry's credentials, base64
    encoded; rke-tools' entrypoint writes it where the kubelet looks (`/var/lib/kubelet/config.json`).
    Empty when no registry has credentials."""
    auths = {
        host: {"auth": base64.b64encode(f"{cred['username']}:{cred['password']}".encode()).decode()}
        for host, cred in registry_auth(config).items()
    }
    if not auths:
        return ""
    return base64.b64encode(json.dumps({"auths": auths}, sort_keys=True).encode()).decode()
