"""The ready-to-use cluster.yml for a lab, written like an air-gapped site's."""

from __future__ import annotations

import io
import shlex
from typing import Any

from ruamel.yaml import YAML

from rke_py.config import kdm
from rke_py.lab import addonimages
from rke_py.lab.state import Lab

# system_images keys the lab fills, and the lab image behind each (rke-tools serves four, as in RKE).
SYSTEM_IMAGES = {
    "etcd": "etcd",
    "alpine": "rke-tools",
    "nginx_proxy": "rke-tools",
    "cert_downloader": "rke-tools",
    "kubernetes_services_sidecar": "rke-tools",
    "kubernetes": "hyperkube",
    "pod_infra_container": "pause",
}

# provider -> the image it needs, by preference: RKE's default first.
DNS_PROVIDERS = {"coredns": "coredns", "kube-dns": "kubedns"}
NODELOCAL_ADDRESS = "169.254.20.10"
# Tokens signed as a URL issuer, and RKE's `rke` still accepted: the apiserver serves OIDC discovery only
# when its first issuer is a URL. RKE renders these keys the same way, so `rke up` keeps them.
OIDC_DISCOVERY = {
    "extra_args": {"service-account-issuer": "https://kubernetes.default.svc.cluster.local"},
    "extra_args_array": {"service-account-issuer": ["rke"]},
}


def cluster_document(lab: Lab) -> dict[str, Any]:
    """cluster.yml as data: images named without the registry, which `is_default` prefixes."""
    return {
        "cluster_name": lab.name,
        "kubernetes_version": lab.kubernetes_version,
        "ssh_key_path": str(lab.key_path),
        "nodes": [
            {
                "address": host.address,
                "hostname_override": host.name,
                "user": lab.user,
                "role": host.role,
                "ssh_key_path": str(lab.key_path),
            }
            for host in lab.hosts
        ],
        # Add-on images cannot be pulled into the lab (no internet), so the add-ons whose pods would never
        # start are off unless `lab up --addon-binaries` built their images; tests/lab/test_up_addons.py
        # switches them on. Without flannel's, the lab brings its own pod network (lab-init writes each
        # node's CNI config), as a user's own CNI would with `plugin: none`.
        "network": {"plugin": "flannel" if lab.flannel else "none"},
        "dns": _dns(lab),
        "ingress": {"provider": "none"},
        "monitoring": {"provider": "metrics-server" if "metrics_server" in lab.addons else "none"},
        "private_registries": [_registry(lab)],
        "system_images": _system_images(lab),
        **({"services": {"kube-api": OIDC_DISCOVERY}} if lab.oidc_discovery else {}),
    }


def _system_images(lab: Lab) -> dict[str, str]:
    """The lab's own images, or none when the registry serves Rancher's under KDM's names."""
    own = {} if lab.rancher else {key: lab.images[image] for key, image in SYSTEM_IMAGES.items()}
    return own | _unlisted_add_ons(lab)


def _unlisted_add_ons(lab: Lab) -> dict[str, str]:
    """The add-on images the lab serves, named for a version KDM does not list (rke-py knows none for it)."""
    if kdm.system_images(lab.kubernetes_version) is not None:
        return {}
    defaults = addonimages.default_images(lab.kubernetes_version)
    return {key: defaults[key] for key in lab.addons if defaults.get(key)}


def _dns(lab: Lab) -> dict[str, Any]:
    """RKE's DNS add-on whose images the lab serves (see DNS_PROVIDERS), with NodeLocal DNSCache at RKE's
    documented address when node-cache is there too."""
    provider = next((p for p, key in DNS_PROVIDERS.items() if key in lab.addons), "none")
    dns: dict[str, Any] = {"provider": provider}
    if provider != "none" and "nodelocal" in lab.addons:
        dns["nodelocal"] = {"ip_address": NODELOCAL_ADDRESS}
    return dns


def _registry(lab: Lab) -> dict[str, Any]:
    if not lab.private_registry:
        return {"url": lab.registry, "is_default": True}
    return {
        "url": lab.private_registry,
        "user": lab.registry_user,
        "password": lab.registry_password,
        "is_default": True,
    }


def cluster_args(lab: Lab) -> list[str]:
    """--config plus the lab's known_hosts with strict host-key checking: nothing is trusted blindly."""
    known = ["--known-hosts", str(lab.known_hosts), "--host-key-policy", "strict"]
    return ["--config", str(lab.cluster_yml), *known]


def up_args(lab: Lab) -> list[str]:
    """rke-py's arguments that build the lab's cluster."""
    return ["up", *cluster_args(lab)]


def up_command(lab: Lab) -> str:
    return "rke-py " + shlex.join(up_args(lab))


def render(lab: Lab) -> str:
    yaml = YAML()
    yaml.default_flow_style = False
    out = io.StringIO()
    out.write(
        f"# Lab cluster {lab.name!r}, written by `rke-py lab up`.\n"
        f"# Host keys of every node are in {lab.known_hosts}; use them with\n"
        f"#   {up_command(lab)}\n"
    )
    yaml.dump(cluster_document(lab), out)
    return out.getvalue()
