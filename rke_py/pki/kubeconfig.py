"""Kubeconfig files: one per component certificate on the nodes, and the admin file on the workstation.

Rendered from `templates/kubeconfig.yaml.j2` in RKE's exact layout. Output depends only on the inputs, so
a file's hash (part of every container's spec hash) is stable from run to run.
"""

from __future__ import annotations

import base64
import functools

from rke_py.config.schema import ClusterConfig
from rke_py.pki.bundle import CA, KUBE_ADMIN, Bundle
from rke_py.pki.paths import cert_path, key_path
from rke_py.templating import hostport, template

LOCAL_SERVER = "https://127.0.0.1:6443"  # every node reaches an apiserver here (itself, or nginx-proxy)
LOCAL_CLUSTER = "local"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@functools.cache  # every node's plan asks for the same few
def component_kubeconfig(name: str) -> str:
    """The kubeconfig RKE gives certificate `name` (`kubecfg-<name>.yaml`), paths as seen in containers."""
    return template("kubeconfig.yaml.j2").render(
        ca_data="",
        ca_path=cert_path(CA),
        server=LOCAL_SERVER,
        cluster=LOCAL_CLUSTER,
        user=f"{name}-{LOCAL_CLUSTER}",
        key_data="",
        cert_path=cert_path(name),
        key_path=key_path(name),
    )


def default_server(config: ClusterConfig) -> str:
    """Where RKE points the admin kubeconfig: the first controlplane node's address."""
    controlplane = config.hosts("controlplane")
    if not controlplane:
        raise ValueError("the cluster has no controlplane node")
    return f"https://{hostport(controlplane[0].address, 6443)}"


def admin_kubeconfig(config: ClusterConfig, bundle: Bundle, server: str) -> str:
    """`kube_config_<cluster>.yml`: kube-admin's certificate and key embedded, named `cluster_name`."""
    admin = bundle[KUBE_ADMIN]
    return template("kubeconfig.yaml.j2").render(
        ca_data=_b64(bundle[CA].leaf_pem),
        server=server,
        cluster=config.cluster_name,
        user=f"{KUBE_ADMIN}-{config.cluster_name}",
        cert_data=_b64(admin.leaf_pem),
        key_data=_b64(admin.key_pem),
    )
