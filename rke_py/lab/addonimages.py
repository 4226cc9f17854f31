"""Add-on images built from upstream binaries (`lab up --addon-binaries DIR`).

The lab registry serves each one under the name and tag of the Kubernetes version's default system image
(KDM's, e.g. `rancher/mirrored-k8s-dns-kube-dns:1.22.28`), so the lab's cluster.yml keeps RKE's add-on
defaults and only `private_registries` points at the lab, as an air-gapped site's does.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from rke_py.config import kdm
from rke_py.lab.images import CNI_DIR, CNI_PLUGINS, PATH, Recipe, etc, iptables, lab_file
from rke_py.lab.rootfs import Rootfs
from rke_py.lab.state import LabError

DNSMASQ = "/usr/sbin/dnsmasq"  # Debian's dnsmasq-base


def _static(name: str) -> Recipe:
    """An upstream image that is one static binary at /NAME, its entrypoint."""

    def recipe(directory: Path) -> tuple[Rootfs, list[str]]:
        r = Rootfs()
        etc(r, [], [])
        r.file(f"/{name}", source=str(directory / name), mode=0o755)
        return r, [f"ENV PATH={PATH}", f'ENTRYPOINT ["/{name}"]']

    return recipe


def _dnsmasq_nanny(directory: Path) -> tuple[Rootfs, list[str]]:
    """The nanny at /dnsmasq-nanny and the dnsmasq it starts at /usr/sbin/dnsmasq, run as root as
    upstream's `k8s-dns-dnsmasq` base configures it."""
    r = Rootfs()
    etc(r, [], [])
    r.binary(DNSMASQ)
    r.file("/etc/dnsmasq.conf", data="user=root\n")
    r.dir("/etc/k8s/dns/dnsmasq-nanny")
    r.file("/dnsmasq-nanny", source=str(directory / "dnsmasq-nanny"), mode=0o755)
    return r, [f"ENV PATH={PATH}", 'ENTRYPOINT ["/dnsmasq-nanny"]']


def _node_cache(directory: Path) -> tuple[Rootfs, list[str]]:
    """node-cache on iptables, which it uses to let its listen address bypass conntrack."""
    r, changes = _static("node-cache")(directory)
    iptables(r)
    return r, changes


def _flanneld(directory: Path) -> tuple[Rootfs, list[str]]:
    """flanneld where RKE's template runs it (/opt/bin/flanneld), with iptables for its masquerade rules."""
    r = Rootfs()
    etc(r, [], [])
    iptables(r)
    r.file("/opt/bin/flanneld", source=str(directory / "flanneld"), mode=0o755)
    return r, [f"ENV PATH={PATH}", 'ENTRYPOINT ["/opt/bin/flanneld"]']


def _flannel_cni(directory: Path) -> tuple[Rootfs, list[str]]:
    """RKE's flannel-cni: the flannel CNI plugin (from DIR) and Debian's plugins it delegates to and the
    template's config chains (bridge, host-local, portmap) in /opt/cni/bin, and /install-cni.sh that puts
    them on the host."""
    r = Rootfs()
    r.busybox()
    for plugin in CNI_PLUGINS:
        r.file(f"/opt/cni/bin/{plugin}", source=f"{CNI_DIR}/{plugin}", mode=0o755)
    r.file("/opt/cni/bin/flannel", source=str(directory / "flannel"), mode=0o755)
    r.file("/install-cni.sh", data=lab_file("install-cni.sh"), mode=0o755)
    return r, [f"ENV PATH={PATH}"]


# binary in DIR -> the recipe of its image and the system_images keys that image serves
BINARIES: dict[str, tuple[Recipe, tuple[str, ...]]] = {
    "kube-dns": (_static("kube-dns"), ("kubedns",)),
    "dnsmasq-nanny": (_dnsmasq_nanny, ("dnsmasq",)),
    "sidecar": (_static("sidecar"), ("kubedns_sidecar",)),
    "node-cache": (_node_cache, ("nodelocal",)),
    "cluster-proportional-autoscaler": (
        _static("cluster-proportional-autoscaler"),
        ("kubedns_autoscaler", "coredns_autoscaler"),
    ),
    "coredns": (_static("coredns"), ("coredns",)),
    "metrics-server": (_static("metrics-server"), ("metrics_server",)),
    "flanneld": (_flanneld, ("flannel",)),
    "flannel": (_flannel_cni, ("flannel_cni",)),  # the CNI plugin, as upstream names it
}


def found(directory: Path) -> dict[str, tuple[Recipe, tuple[str, ...]]]:
    """The add-on binaries `directory` holds; none at all is a mistake worth a clear answer."""
    present = {name: entry for name, entry in BINARIES.items() if (directory / name).is_file()}
    if not present:
        raise LabError(f"--addon-binaries {directory}: none of {', '.join(BINARIES)} is there")
    return present


def default_images(version: str) -> Mapping[str, str]:
    """KDM's default images of Kubernetes `version`; for a build KDM never listed (v1.28.0: RKE skipped
    it), those of the nearest listed patch of its minor, which cluster.yml then has to name itself."""
    if (listed := kdm.system_images(version)) is not None:
        return listed
    wanted = kdm.version_key(version)
    same_minor = [v for v in kdm.versions() if kdm.version_key(v)[:2] == wanted[:2]]
    if not same_minor:
        raise LabError(f"Kubernetes {version} has no default system images to publish add-ons under")
    nearest = min(same_minor, key=lambda v: abs(kdm.version_key(v)[2] - wanted[2]))
    return kdm.system_images(nearest) or {}


def published_names(version: str, keys: tuple[str, ...]) -> list[str]:
    """The default image names of `keys` for Kubernetes `version`, without a registry."""
    images = default_images(version)
    return sorted({images[key] for key in keys if images.get(key)})
