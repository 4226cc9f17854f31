"""kube-scheduler (`BuildSchedulerProcess`, KDM `getSchedulerOptions124`)."""

from __future__ import annotations

from rke_py.config.schema import ClusterConfig
from rke_py.pki.paths import kubeconfig_path
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
from rke_py.plan.model import ContainerSpec

NAME = "kube-scheduler"


def flags() -> dict[str, str]:
    kubeconfig = kubeconfig_path(NAME)
    return {
        "authentication-kubeconfig": kubeconfig,
        "authorization-kubeconfig": kubeconfig,
        "kubeconfig": kubeconfig,
        "leader-elect": "true",
        "profiling": "false",
        "v": "2",
    }


def container(config: ClusterConfig) -> ContainerSpec:
    service = config.services.scheduler
    return ContainerSpec(
        name=NAME,
        image=config.system_images.kubernetes,
        entrypoint=k8s_entrypoint(NAME, flags(), service),
        env=env([], service),
        binds=binds([f"{host_path(config, KUBE_DIR)}:{KUBE_DIR}:z"], service),
        volumes_from=(SIDEKICK,),
        # The kubeconfig names kube-ca.pem as its certificate authority, so the CA is read too.
        files=(kubeconfig_file(config, NAME), *cert_files(config, NAME), ca_file(config)),
    )
