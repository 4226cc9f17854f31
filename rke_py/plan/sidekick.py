"""service-sidekick: created, never started; it only shares rke-tools' `/opt/rke-tools` volume
(entrypoint.sh, cri-dockerd) with the Kubernetes containers through `volumes_from`."""

from __future__ import annotations

from rke_py.config.schema import ClusterConfig
from rke_py.plan.common import SIDEKICK
from rke_py.plan.model import ContainerSpec


def container(config: ClusterConfig) -> ContainerSpec:
    return ContainerSpec(
        name=SIDEKICK,
        image=config.system_images.kubernetes_services_sidecar,
        entrypoint=("/bin/bash",),
        network_mode="none",
        restart_policy="",
        start=False,
    )
