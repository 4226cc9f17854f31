"""A small, offline stand-in for RKE's Kontainer Driver Metadata (KDM): system images per Kubernetes version.

RKE embeds KDM's `K8sVersionRKESystemImages`; rke-py carries only the versions it is tested with. The etcd,
hyperkube, rke-tools and pause images of v1.30.4-rancher1-1 are the ones a real RKE v1.6.2 run used; the
addon images (DNS, CNI, ingress, metrics) are KDM's for that release as best known, and rke-py does not
deploy those addons. Any other version works when cluster.yml's `system_images` names the images rke-py runs.
"""

from __future__ import annotations

import re
from types import MappingProxyType

DEFAULT_K8S_VERSION = "v1.30.4-rancher1-1"

# The images rke-py itself runs; a version missing from the table needs at least these in system_images.
REQUIRED_IMAGES = (
    "etcd",
    "kubernetes",
    "alpine",
    "nginx_proxy",
    "kubernetes_services_sidecar",
    "pod_infra_container",
)

_RKE_TOOLS = "rancher/rke-tools:v0.1.102"
_CALICO = "v3.28.1"

SYSTEM_IMAGES: MappingProxyType[str, MappingProxyType[str, str]] = MappingProxyType(
    {
        "v1.30.4-rancher1-1": MappingProxyType(
            {
                "etcd": "rancher/mirrored-coreos-etcd:v3.5.12",
                "kubernetes": "rancher/hyperkube:v1.30.4-rancher1",
                "alpine": _RKE_TOOLS,
                "nginx_proxy": _RKE_TOOLS,
                "cert_downloader": _RKE_TOOLS,
                "kubernetes_services_sidecar": _RKE_TOOLS,
                "pod_infra_container": "rancher/mirrored-pause:3.7",
                "windows_pod_infra_container": "rancher/mirrored-pause:3.7",
                "kubedns": "rancher/mirrored-k8s-dns-kube-dns:1.23.0",
                "dnsmasq": "rancher/mirrored-k8s-dns-dnsmasq-nanny:1.23.0",
                "kubedns_sidecar": "rancher/mirrored-k8s-dns-sidecar:1.23.0",
                "kubedns_autoscaler": "rancher/mirrored-cluster-proportional-autoscaler:v1.8.9",
                "coredns": "rancher/mirrored-coredns-coredns:1.10.1",
                "coredns_autoscaler": "rancher/mirrored-cluster-proportional-autoscaler:v1.8.9",
                "nodelocal": "rancher/mirrored-k8s-dns-node-cache:1.23.0",
                "flannel": "rancher/mirrored-flannel-flannel:v0.25.1",
                "flannel_cni": "rancher/flannel-cni:v1.4.1-rancher1",
                "calico_node": f"rancher/mirrored-calico-node:{_CALICO}",
                "calico_cni": f"rancher/calico-cni:{_CALICO}-rancher1",
                "calico_controllers": f"rancher/mirrored-calico-kube-controllers:{_CALICO}",
                "calico_ctl": f"rancher/mirrored-calico-ctl:{_CALICO}",
                "calico_flexvol": f"rancher/mirrored-calico-pod2daemon-flexvol:{_CALICO}",
                "canal_node": f"rancher/mirrored-calico-node:{_CALICO}",
                "canal_cni": f"rancher/calico-cni:{_CALICO}-rancher1",
                "canal_controllers": f"rancher/mirrored-calico-kube-controllers:{_CALICO}",
                "canal_flannel": "rancher/mirrored-flannel-flannel:v0.25.1",
                "canal_flexvol": f"rancher/mirrored-calico-pod2daemon-flexvol:{_CALICO}",
                "ingress": "rancher/nginx-ingress-controller:nginx-1.10.4-rancher1",
                "ingress_backend": "rancher/mirrored-nginx-ingress-controller-defaultbackend:1.5-rancher1",
                "ingress_webhook": "rancher/mirrored-ingress-nginx-kube-webhook-certgen:v1.4.1",
                "metrics_server": "rancher/mirrored-metrics-server:v0.7.1",
            }
        )
    }
)


def versions() -> list[str]:
    """The Kubernetes versions rke-py knows images for, default first."""
    return [DEFAULT_K8S_VERSION, *(v for v in SYSTEM_IMAGES if v != DEFAULT_K8S_VERSION)]


def system_images(version: str) -> MappingProxyType[str, str] | None:
    """The default images for `version`, or None when rke-py does not know it."""
    return SYSTEM_IMAGES.get(version)


_VERSION = re.compile(
    r"v(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?\Z",
    re.ASCII,
)


def parse_version(text: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a `vX.Y.Z[-pre][+build]` version, or None when it is not one."""
    match = _VERSION.match(text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None
