"""kube-proxy (`BuildKubeProxyProcess`, KDM `getKubeProxyOptions`)."""

from __future__ import annotations

from rke_py.config.schema import ClusterConfig, Node
from rke_py.pki.paths import kubeconfig_path
from rke_py.plan import cloud_provider
from rke_py.plan.common import (
    KUBE_DIR,
    SIDEKICK,
    binds,
    ca_file,
    cert_files,
    env,
    host_path,
    k8s_entrypoint,
    kubeconfig_file,
)
from rke_py.plan.kubelet import metadata_hostname
from rke_py.plan.memo import once
from rke_py.plan.model import ContainerSpec

NAME = "kube-proxy"


def flags(config: ClusterConfig, node: Node) -> dict[str, str]:
    out = {
        "cluster-cidr": config.services.kube_controller.cluster_cidr,
        "healthz-bind-address": "127.0.0.1",
        "hostname-override": node.name,
        "kubeconfig": kubeconfig_path(NAME),
        "v": "2",
    }
    if cloud_provider.provider(config) is not None:
        # RKE: a cloud provider may rename the Node, so kube-proxy is told its address instead.
        out["bind-address"] = node.internal_address or node.address
        if metadata_hostname(config):
            del out["hostname-override"]
    return out


def container(config: ClusterConfig, node: Node) -> ContainerSpec:
    service = config.services.kubeproxy
    return ContainerSpec(
        name=NAME,
        image=config.system_images.kubernetes,
        entrypoint=k8s_entrypoint(NAME, flags(config, node), service),
        env=once((NAME, "env"), lambda: env(_env(config), service)),
        binds=once((NAME, "binds"), lambda: binds(_binds(config), service)),
        pid_mode="host",
        privileged=True,
        volumes_from=(SIDEKICK,),
        files=once(
            (NAME, "files"),
            lambda: (kubeconfig_file(config, NAME), *cert_files(config, NAME), ca_file(config)),
        ),
    )


def _env(config: ClusterConfig) -> list[str]:
    # rke-tools' entrypoint loads br_netfilter before kube-proxy starts, for canal's and flannel's bridges
    return ["RKE_KUBE_PROXY_BR_NETFILTER=true"] if config.network.enable_br_netfilter else []


def _binds(config: ClusterConfig) -> list[str]:
    return [f"{host_path(config, KUBE_DIR)}:{KUBE_DIR}:z", "/run:/run", "/lib/modules:/lib/modules:ro"]
