"""kube-controller-manager (`BuildKubeControllerProcess`, KDM `getKubeControllerOptions127`)."""

from __future__ import annotations

from rke_py.config.schema import ClusterConfig
from rke_py.pki.paths import cert_path, key_path, kubeconfig_path
from rke_py.plan import cloud_provider
from rke_py.plan.common import (
    CA,
    KUBE_DIR,
    SIDEKICK,
    binds,
    ca_file,
    cert_files,
    env,
    host_path,
    is_rbac,
    k8s_entrypoint,
    kubeconfig_file,
)
from rke_py.plan.model import ContainerSpec

NAME = "kube-controller-manager"


def flags(config: ClusterConfig) -> dict[str, str]:
    kubeconfig = kubeconfig_path(NAME)
    return {
        **cloud_provider.flags(config),
        "allocate-node-cidrs": "true",
        "allow-untagged-cloud": "true",
        "authentication-kubeconfig": kubeconfig,
        "authorization-kubeconfig": kubeconfig,
        "cluster-cidr": config.services.kube_controller.cluster_cidr,
        "configure-cloud-routes": "false",
        "enable-hostpath-provisioner": "false",
        "kubeconfig": kubeconfig,
        "leader-elect": "true",
        "node-monitor-grace-period": "40s",
        "profiling": "false",
        "root-ca-file": cert_path(CA),
        "service-account-private-key-file": key_path("kube-service-account-token"),
        "service-cluster-ip-range": config.services.kube_controller.service_cluster_ip_range,
        "terminated-pod-gc-threshold": "1000",
        "v": "2",
    }


def container(config: ClusterConfig) -> ContainerSpec:
    service = config.services.kube_controller
    prefix = config.prefix_path or "/"
    return ContainerSpec(
        name=NAME,
        image=config.system_images.kubernetes,
        entrypoint=k8s_entrypoint(NAME, flags(config), service),
        command=("--use-service-account-credentials=true",) if is_rbac(config) else (),
        env=env(cloud_provider.checksum_env(config), service),
        binds=binds([f"{host_path(config, KUBE_DIR)}:{KUBE_DIR}:z"], service),
        volumes_from=(SIDEKICK,),
        files=(
            kubeconfig_file(config, NAME),
            *cert_files(config, NAME),
            ca_file(config),
            key_path("kube-service-account-token", prefix),
            *cloud_provider.read_files(config),
        ),
    )
