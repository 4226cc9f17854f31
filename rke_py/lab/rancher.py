"""Rancher's own images, built here from their public sources (`lab up --rancher-images DIR`).

What every RKE user pulls (rancher/rke-tools, rancher/hyperkube, rancher/mirrored-coreos-etcd and
rancher/mirrored-pause) is laid out as each project's Dockerfile lays it out, from what DIR holds, with
Debian's packages (debootstrap) where those Dockerfiles install Alpine's or Ubuntu's:

    DIR/rke-tools/       rancher/rke-tools at the release KDM names: its scripts and confd templates,
                         used as they are
    DIR/hyperkube-base/  rancher/hyperkube-base at the release rancher/hyperkube builds on, with
                         scripts/iptables-wrapper-installer.sh (kubernetes-sigs/iptables-wrappers v2), which
                         its Makefile downloads
    DIR/nginx/           nginx installed (`make install DESTDIR=DIR/nginx`), its stream module built in as
                         the nginx image's: usr/sbin/nginx and etc/nginx
    DIR/bin/             confd, rke-etcd-backup, busybox (static, with the netcat of Alpine's, -k and -z),
                         etcd, etcdctl, etcdutl and pause, built from their sources

with kube-*, kubectl and cri-dockerd from --kubernetes-binaries. The lab registry serves them under KDM's
names for the cluster's version, so the lab's cluster.yml names no system image, as an air-gapped site's.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import docker

from rke_py.config import kdm
from rke_py.lab import addonimages
from rke_py.lab.images import (
    CNI_DIR,
    KUBE_COMPONENTS,
    LABEL_HASH,
    LABEL_IMAGE,
    RECIPE_VERSION,
    LabImage,
    Progress,
    build,
    etc,
    prune_superseded,
)
from rke_py.lab.rootfs import Rootfs, file_sha256
from rke_py.lab.state import LabError

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# rancher/hyperkube-base's package list (its Dockerfile, v0.0.20), as Debian 12 has them. Left out:
# zfsutils-linux (Debian's is in contrib) and azure-cli (from Microsoft's repository there), which only
# rke-tools' cloud-provider.sh uses, for an Azure cloud provider.
HYPERKUBE_PACKAGES = (
    *("apt-transport-https", "arptables", "ca-certificates", "ceph-common", "cifs-utils", "conntrack"),
    *("curl", "e2fsprogs", "xfsprogs", "ebtables", "ethtool", "git", "glusterfs-client", "glusterfs-common"),
    *("gnupg1", "iproute2", "ipset", "iptables", "iputils-ping", "jq", "kmod", "lsb-release", "open-iscsi"),
    *("openssh-client", "procps", "netbase", "nfs-common", "samba-common", "socat", "udev", "util-linux"),
)
# What rke-tools' Dockerfile adds to nginx:alpine (bash, curl, wget, ca-certificates, tar, sysstat, acl).
RKE_TOOLS_PACKAGES = ("bash", "curl", "wget", "ca-certificates", "tar", "sysstat", "acl")
RANCHER_BINARIES = ("confd", "rke-etcd-backup", "busybox", "etcd", "etcdctl", "etcdutl", "pause")
NGINX_FILES = ("usr/sbin/nginx", "etc/nginx/nginx.conf", "etc/nginx/mime.types")
RKE_TOOLS_FILES = (
    "entrypoint.sh",
    "cloud-provider.sh",
    "weave-plugins-cni.sh",
    "cert-deployer",
    "nginx-proxy",
    "conf.d/nginx.toml",
    "templates/nginx.tmpl",
)
HYPERKUBE_BASE_FILES = ("scripts/hyperkube", "scripts/iptables-wrapper-installer.sh")
KUBE_BINARIES = (*KUBE_COMPONENTS, "kubectl", "cri-dockerd")
# system_images keys -> the image that serves them
SERVES = {
    "rke-tools": ("alpine", "nginx_proxy", "cert_downloader", "kubernetes_services_sidecar"),
    "hyperkube": ("kubernetes",),
    "etcd": ("etcd",),
    "pause": ("pod_infra_container",),
}


def missing(rancher: Path, binaries: Path | None) -> list[str]:
    """What DIR (and --kubernetes-binaries) lack of the images' sources, as paths."""
    wanted = [
        *(rancher / "rke-tools" / f for f in RKE_TOOLS_FILES),
        *(rancher / "hyperkube-base" / f for f in HYPERKUBE_BASE_FILES),
        *(rancher / "bin" / f for f in RANCHER_BINARIES),
        *(rancher / "nginx" / f for f in NGINX_FILES),
    ]
    if binaries is None:
        return [*map(str, wanted), "--kubernetes-binaries"]
    wanted += [binaries / f for f in KUBE_BINARIES]
    return [str(p) for p in wanted if not p.is_file()]


def images(
    client: docker.DockerClient, rancher: Path, binaries: Path, version: str, progress: Progress
) -> dict[str, LabImage]:
    """Build Rancher's images for Kubernetes `version`; return them by the names KDM gives them."""
    names = {image: addonimages.published_names(version, keys) for image, keys in SERVES.items()}
    names["rke-tools"] = sorted({*names["rke-tools"], *snapshot_tools(version)})
    etcd_tag = names["etcd"][0].rsplit(":", 1)[1].lstrip("v")
    _check_version(rancher / "bin" / "etcd", etcd_tag)
    built = {
        "rke-tools": rke_tools(client, rancher, binaries, progress),
        "hyperkube": hyperkube(client, rancher, binaries, progress),
        "etcd": build(client, "rancher-etcd", lambda: _etcd(rancher / "bin"), progress),
        "pause": build(client, "rancher-pause", lambda: _pause(rancher / "bin"), progress),
    }
    return {name: built[image] for image, published in names.items() for name in published}


def snapshot_tools(version: str) -> list[str]:
    """The rke-tools names RKE runs its etcd snapshot containers on: the `alpine` of its default version
    (`util.GetDefaultRKETools`), which is the newest patch of the line for RKE 1.5 and the default of the
    data rke-py carries. The lab serves the one rke-tools it builds under these too: between v0.1.96 and
    v0.1.103 rke-etcd-backup's source (main.go) is the same, only the bundled tools' versions differ."""
    minor = kdm.version_key(version)[:2]
    newest = max((v for v in kdm.versions() if kdm.version_key(v)[:2] == minor), key=kdm.version_key)
    return addonimages.published_names(newest, ("alpine",)) + addonimages.published_names(
        kdm.DEFAULT_K8S_VERSION, ("alpine",)
    )


def _check_version(etcd: Path, wanted: str) -> None:
    """The etcd built must be the release KDM names: the image is served under that name."""
    done = subprocess.run([str(etcd), "--version"], capture_output=True, text=True, check=False)
    found = re.search(r"etcd Version: (\S+)", done.stdout)
    if found is None or found.group(1) != wanted:
        given = found.group(1) if found else "no version"
        raise LabError(
            f"{etcd} is etcd {given}; the cluster's version runs etcd {wanted}: build that release"
        )


def _etcd(bindir: Path) -> tuple[Rootfs, list[str]]:
    """etcd's release image (Dockerfile-release): the three binaries on distroless/static, no shell."""
    r = Rootfs()
    etc(r, ["nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin"], [])
    for name in ("etcd", "etcdctl", "etcdutl"):
        r.file(f"/usr/local/bin/{name}", source=str(bindir / name), mode=0o755)
    r.dir("/var/etcd")
    r.dir("/var/lib/etcd")
    return r, ["WORKDIR /var/lib/etcd/", 'CMD ["/usr/local/bin/etcd"]']


def _pause(bindir: Path) -> tuple[Rootfs, list[str]]:
    """Kubernetes' pause image (build/pause): the static /pause alone, run as 65535."""
    r = Rootfs()
    r.file("/pause", source=str(bindir / "pause"), mode=0o755)
    return r, ["USER 65535:65535", 'ENTRYPOINT ["/pause"]']


def rke_tools(client: docker.DockerClient, rancher: Path, binaries: Path, progress: Progress) -> LabImage:
    """rke-tools' package/Dockerfile, step for step, on Debian instead of nginx:alpine; Alpine's busybox
    gives that image its `nc` (RKE's port checks run `nc -kl` and `nc -z` in it), here busybox does too."""
    tools, bindir = rancher / "rke-tools", rancher / "bin"
    files = {
        "nginx": rancher / "nginx",
        "busybox": bindir / "busybox",
        "confd": bindir / "confd",
        "docker": Path("/usr/bin/docker"),  # Debian's docker.io 20.10.24, DOCKER_VERSION of the Dockerfile
        "cri-dockerd": binaries / "cri-dockerd",
        "kubectl": binaries / "kubectl",
        "etcdctl": bindir / "etcdctl",
        "rke-etcd-backup": bindir / "rke-etcd-backup",
        **{f"cni/{p.name}": p for p in sorted(Path(CNI_DIR).iterdir())},
        **{f: tools / f for f in RKE_TOOLS_FILES},
    }
    dockerfile = """\
RUN rm -f /bin/sh && ln -s /bin/bash /bin/sh
RUN mkdir -p /opt/rke-tools/bin /etc/confd /opt/cni/bin /var/log/nginx /var/cache/nginx \\
    && useradd --system --no-create-home --home-dir /nonexistent --shell /sbin/nologin nginx
COPY nginx/ /
COPY busybox /bin/busybox
RUN ln -s /bin/busybox /usr/bin/nc
COPY confd /usr/bin/confd
COPY docker cri-dockerd /opt/rke-tools/bin/
COPY kubectl /usr/local/bin/kubectl
COPY cni/ /tmp/
COPY etcdctl /usr/local/bin/etcdctl
COPY templates /etc/confd/templates/
COPY conf.d /etc/confd/conf.d/
COPY cert-deployer nginx-proxy /usr/bin/
COPY entrypoint.sh cloud-provider.sh weave-plugins-cni.sh /opt/rke-tools/
COPY rke-etcd-backup /opt/rke-tools
VOLUME /opt/rke-tools
CMD ["/bin/bash"]
"""
    base = debian(client, RKE_TOOLS_PACKAGES, progress)
    return docker_build(client, "rancher-rke-tools", base, dockerfile, files, progress)


def hyperkube(client: docker.DockerClient, rancher: Path, binaries: Path, progress: Progress) -> LabImage:
    """rancher/hyperkube-base's Dockerfile on Debian, then rancher/hyperkube's: the binaries in
    /usr/local/bin."""
    scripts = rancher / "hyperkube-base" / "scripts"
    files = {
        "hyperkube": scripts / "hyperkube",
        "iptables-wrapper-installer.sh": scripts / "iptables-wrapper-installer.sh",
        **{f"k8s-binaries/{name}": binaries / name for name in (*KUBE_COMPONENTS, "kubectl")},
    }
    tools = ("apiserver", "cloud-controller-manager", "controller-manager", "kubectl", "kubelet", "proxy")
    links = " && ".join(f"ln -s /hyperkube /{name}" for name in (*tools, "scheduler"))
    dockerfile = f"""\
COPY hyperkube /hyperkube
COPY iptables-wrapper-installer.sh /usr/sbin/iptables-wrapper-installer.sh
RUN ln -s /usr/bin/update-alternatives /usr/sbin/update-alternatives
RUN {links}
RUN echo "dash dash/sh boolean false" | debconf-set-selections
RUN DEBIAN_FRONTEND=noninteractive dpkg-reconfigure dash
RUN /usr/sbin/iptables-wrapper-installer.sh
ENTRYPOINT ["/hyperkube"]
COPY k8s-binaries/kube* /usr/local/bin/
"""
    base = debian(client, HYPERKUBE_PACKAGES, progress)
    return docker_build(client, "rancher-hyperkube", base, dockerfile, files, progress)


def _built(client: docker.DockerClient, image: LabImage) -> bool:
    return bool(client.images.list(filters={"label": f"{LABEL_HASH}={image.digest}"}))


def _labels(image: LabImage) -> dict[str, str]:
    return {LABEL_IMAGE: image.name, LABEL_HASH: image.digest}


def debian(
    client: docker.DockerClient, packages: tuple[str, ...] | list[str], progress: Progress
) -> LabImage:
    """A Debian root filesystem with `packages` (debootstrap's minbase), built once per package list."""
    wanted = sorted(packages)
    digest = hashlib.sha256(
        "\n".join([RECIPE_VERSION, DEBIAN_SUITE, DEBIAN_MIRROR, *wanted]).encode()
    ).hexdigest()
    image = LabImage(f"debian-{digest[:8]}", digest)
    if _built(client, image):
        return image
    if shutil.which("debootstrap") is None:
        raise LabError("Rancher's images are built on Debian with debootstrap: apt-get install debootstrap")
    progress(f"building a Debian {DEBIAN_SUITE} root filesystem with {len(wanted)} packages (debootstrap)")
    with tempfile.TemporaryDirectory(prefix="rke-py-debian-") as tmp:
        root = Path(tmp, "root")
        command = ["debootstrap", "--variant=minbase", f"--include={','.join(wanted)}", DEBIAN_SUITE]
        done = subprocess.run(
            [*command, str(root), DEBIAN_MIRROR], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            tail = "\n".join(done.stdout.splitlines()[-5:] + done.stderr.splitlines()[-5:])
            raise LabError(f"debootstrap failed:\n{tail}")
        tarball = Path(tmp, "root.tar")
        subprocess.run(["tar", "-C", str(root), "-cf", str(tarball), "."], check=True)
        changes = [f"LABEL {k}={v}" for k, v in _labels(image).items()]
        client.api.import_image_from_file(str(tarball), repository=image.path, tag=image.tag, changes=changes)
    return image


def docker_build(
    client: docker.DockerClient,
    name: str,
    base: LabImage,
    steps: str,
    files: dict[str, Path],
    progress: Progress,
) -> LabImage:
    """`FROM base` and `steps`, with `files` (context path -> file here) as the build context; built once
    for the same base, steps and file contents."""
    h = hashlib.sha256(f"{RECIPE_VERSION}\n{base.ref}\n{steps}".encode())
    for dest, source in sorted(_every_file(files).items()):
        h.update(f"{dest} {os.stat(source).st_mode & 0o777:o} {file_sha256(str(source))}\n".encode())
    image = LabImage(name, h.hexdigest())
    if _built(client, image):
        return image
    progress(f"building image {image.ref}")
    with tempfile.TemporaryDirectory(prefix="rke-py-build-") as context:
        for dest, source in _every_file(files).items():
            target = Path(context, dest)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        Path(context, "Dockerfile").write_text(f"FROM {base.ref}\n{steps}")
        try:
            client.images.build(path=context, tag=image.ref, labels=_labels(image), rm=True, forcerm=True)
        except docker.errors.BuildError as exc:
            lines = [str(x.get("stream", x.get("error", ""))).rstrip() for x in exc.build_log]
            raise LabError(f"building {name}: {exc.msg}\n" + "\n".join(lines[-10:])) from None
    prune_superseded(client, image)
    return image


def _every_file(files: dict[str, Path]) -> dict[str, Path]:
    """`files` with each directory given as the files under it."""
    out = {}
    for dest, source in files.items():
        if source.is_dir():
            out |= {f"{dest}/{p.relative_to(source)}": p for p in sorted(source.rglob("*")) if p.is_file()}
        else:
            out[dest] = source
    return out
