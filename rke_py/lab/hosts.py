"""Lab hosts: containers that behave like machines, each with its own sshd and dockerd.

`up` builds (or reuses) the images, starts the shared registry, makes an internal network with a /24
chosen from the lab's name, starts N hosts in parallel at stable addresses (.11, .12, ...), and writes
the lab's key, known_hosts, cluster.yml and lab.json, and each host's SSH host keys (a host made anew gets
them back). `down` removes exactly what `up` made, found by label. `status` reports what is up.
"""

from __future__ import annotations

import hashlib
import io
import ipaddress
import json
import re
import secrets
import shutil
import socket
import subprocess
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
from docker.models.containers import Container

from rke_py.config import values
from rke_py.errors import UsageError
from rke_py.files import write_private_file
from rke_py.lab import addonimages, clusteryml, images, keys, rancher, registry, subnets, testimages
from rke_py.lab import s3 as lab_s3
from rke_py.lab.images import LabImage, Progress, lab_file
from rke_py.lab.state import (
    CLUSTER_FILE,
    HOST_KEYS_DIR,
    KEY_FILE,
    KNOWN_HOSTS_FILE,
    KUBERNETES_VERSION,
    LABEL,
    LABEL_ROLE,
    STATE_FILE,
    Lab,
    LabError,
    LabHost,
    roles_for,
    state_dir,
)
from rke_py.state import kubeconfig_path_for, state_path_for

# Flags that let a container run dockerd, cgroups and privileged inner containers on this kind of machine
# (`--privileged` itself fails: the capability bounding set lacks CAP_SYS_RESOURCE). The CLI's
# `--security-opt systempaths=unconfined` is empty MaskedPaths and ReadonlyPaths in the API.
HOST_SECURITY_OPT = ["seccomp=unconfined", "apparmor=unconfined"]
FIRST_HOST_OCTET = 11
REGISTRY_OCTET = 2
PRIVATE_REGISTRY_OCTET = 3
S3_OCTET = 4
READY_TIMEOUT = 90.0
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")
_OUR_FILES = (STATE_FILE, KEY_FILE, KEY_FILE + ".pub", KNOWN_HOSTS_FILE, CLUSTER_FILE)
HOST_KEY_FILES = [f"ssh_host_{kind}_key{ext}" for kind in ("ed25519", "ecdsa", "rsa") for ext in ("", ".pub")]


def _quiet(_: str) -> None:
    pass


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise LabError(f"lab name {name!r}: use lowercase letters, digits and '-', at most 31 characters")


def choose_subnet(client: docker.DockerClient, name: str) -> ipaddress.IPv4Network:
    """172.30.X.0/24 with X from the lab name's hash, moved on past any subnet already in use."""
    return subnets.free_subnet(client, 30, int(hashlib.sha256(name.encode()).hexdigest(), 16) % 256)


def _ensure_network(client: docker.DockerClient, lab: Lab) -> None:
    found = client.networks.list(filters={"label": f"{LABEL}={lab.name}"})
    if found:
        _pod_traffic(found[0].id, "-I")
        return
    subnet = ipaddress.IPv4Network(lab.subnet)
    ipam = subnets.ipam(subnet)
    network = client.networks.create(
        lab.network,
        driver="bridge",
        internal=True,
        ipam=ipam,
        labels={LABEL: lab.name, LABEL_ROLE: "network"},
    )
    _pod_traffic(network.id, "-I")


def _pod_traffic(network_id: str, action: str) -> None:
    """Insert (-I) or delete (-D) the rule letting traffic between the lab's hosts through, whatever its
    addresses: Docker drops what an internal network carries for addresses outside its subnet, which pod
    traffic between nodes is. Only within the lab's own bridge; idempotent."""
    bridge = f"br-{network_id[:12]}"
    rule = ["DOCKER-USER", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]
    present = subprocess.run(["iptables", "-C", *rule], capture_output=True).returncode == 0
    if present != (action == "-I"):
        subprocess.run(["iptables", action, *rule], capture_output=True, check=False)


def _tar(files: dict[str, tuple[bytes, int]], dirs: dict[str, int]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, mode in dirs.items():
            info = tarfile.TarInfo(path)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        for path, (data, mode) in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def daemon_json(*insecure_registries: str) -> bytes:
    """The inner dockerd's configuration: the shipped defaults plus this lab's registries."""
    config = json.loads(lab_file("daemon.json"))
    config["insecure-registries"] = [r for r in insecure_registries if r]
    return (json.dumps(config, indent=2) + "\n").encode()


def pod_subnet(lab: Lab, host: LabHost) -> str:
    """The pod subnet of a lab host: one /24 a host inside RKE's default cluster_cidr (10.42.0.0/16)."""
    return f"10.42.{lab.hosts.index(host)}.0/24"


# A host made before the lab served flannel: the lab's own pod network goes (its routes to the other hosts'
# pod subnets would take flannel's), so that flannel is the only one.
DROP_POD_NETWORK = (
    "[ -f /etc/rke-py-lab/network ] || exit 0; "
    'tail -n +2 /etc/rke-py-lab/network | while read -r dst via; do ip route del "$dst" 2>/dev/null; done; '
    "rm -f /etc/rke-py-lab/network /etc/cni/net.d/10-lab.conflist"
)


def pod_network(lab: Lab, host: LabHost) -> str:
    """The host's pod subnet, then `subnet via-address` for every other host (lab-init reads it)."""
    others = [f"{pod_subnet(lab, h)} {h.address}" for h in lab.hosts if h is not host]
    return "".join(line + "\n" for line in [pod_subnet(lab, host), *others])


def lab_hosts(lab: Lab) -> str:
    """`address name` of every lab host: what the name server on each host answers (lab-init)."""
    return "".join(f"{h.address} {h.name}\n" for h in lab.hosts)


def _create_host(
    client: docker.DockerClient, lab: Lab, host: LabHost, image: LabImage, pubkey: str
) -> Container:
    volume = f"{host.name}-docker"
    labels = {LABEL: lab.name}
    client.volumes.create(volume, labels=labels | {LABEL_ROLE: "volume"})
    api = client.api
    host_config = api.create_host_config(
        cap_add=["ALL"],
        cap_drop=["SYS_RESOURCE"],
        security_opt=HOST_SECURITY_OPT,
        device_cgroup_rules=["a *:* rwm"],
        binds={volume: {"bind": "/var/lib/docker", "mode": "rw"}},
        restart_policy={"Name": "unless-stopped"},
        network_mode=lab.network,
    )
    host_config.update(MaskedPaths=[], ReadonlyPaths=[])
    endpoint = api.create_endpoint_config(ipv4_address=host.address)
    created = api.create_container(
        image.ref,
        name=host.name,
        hostname=host.name,
        labels=labels | {LABEL_ROLE: "host"},
        host_config=host_config,
        networking_config=api.create_networking_config({lab.network: endpoint}),
        stop_timeout=20,
    )
    container = client.containers.get(created["Id"])
    if (saved := lab.host_keys(host)).exists():
        container.put_archive("/etc/ssh", saved.read_bytes())  # host-init makes only the keys it lacks
    files = {
        "root/.ssh/authorized_keys": (pubkey.encode(), 0o600),
        "etc/docker/daemon.json": (daemon_json(lab.registry, lab.private_registry), 0o644),
        "etc/rke-py-lab/hosts": (lab_hosts(lab).encode(), 0o644),
        # lab-init makes this user, in the docker group, with root's key
        "etc/rke-py-lab/user": (f"{lab.user}\n".encode(), 0o644),
    }
    if not lab.flannel:
        files["etc/rke-py-lab/network"] = (pod_network(lab, host).encode(), 0o644)
    archive = _tar(files, {"root": 0o700, "root/.ssh": 0o700, "etc/docker": 0o755, "etc/rke-py-lab": 0o755})
    container.put_archive("/", archive)
    container.start()
    return container


def _ssh_answers(address: str, timeout: float = 1.0) -> bool:
    """True when something at address:22 sends an SSH banner."""
    try:
        with socket.create_connection((address, 22), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def _docker_answers(container: Container) -> bool:
    result = container.exec_run(["docker", "version", "--format", "{{.Server.Version}}"])
    return result.exit_code == 0


def _log_tail(container: Container, lines: int = 10) -> list[str]:
    return container.logs(tail=lines).decode(errors="replace").splitlines()


def wait_ready(host: LabHost, timeout: float = READY_TIMEOUT) -> None:
    """Until `host` answers over SSH and its Docker answers: after it was restarted or its Docker stopped."""
    _wait_ready(docker.from_env().containers.get(host.name), host, timeout)


def _wait_ready(container: Container, host: LabHost, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        container.reload()
        if container.status not in ("running", "created", "restarting"):
            raise LabError(f"{host.name}: exited while starting:\n  " + "\n  ".join(_log_tail(container)))
        if container.status == "running" and _ssh_answers(host.address) and _docker_answers(container):
            return
        time.sleep(0.3)
    raise LabError(
        f"{host.name}: sshd or dockerd not ready after {timeout:.0f}s:\n  "
        + "\n  ".join(_log_tail(container))
    )


def _ensure_host(
    client: docker.DockerClient, lab: Lab, host: LabHost, image: LabImage, pubkey: str
) -> list[str]:
    """Create or start one host, wait for sshd and dockerd, and return its known_hosts lines."""
    try:
        container = client.containers.get(host.name)
        if container.status != "running":
            container.start()
        if lab.flannel:
            container.exec_run(["sh", "-c", DROP_POD_NETWORK])
    except docker.errors.NotFound:
        container = _create_host(client, lab, host, image, pubkey)
    _wait_ready(container, host)
    with tarfile.open(fileobj=io.BytesIO(_host_keys(container, lab, host))) as keys_tar:
        public = [keys_tar.extractfile(m) for m in keys_tar.getmembers() if m.name.endswith(".pub")]
        lines = b"".join(f.read() for f in public if f is not None).decode()
    return keys.known_hosts_lines(host.address, lines)


def _host_keys(container: Container, lab: Lab, host: LabHost) -> bytes:
    """`host`'s SSH host keys, as a tar; saved the first time it answers (see `Lab.host_keys`)."""
    result = container.exec_run(["tar", "-C", "/etc/ssh", "-cf", "-", *HOST_KEY_FILES], demux=True)
    archive, error = result.output
    if result.exit_code != 0:
        raise LabError(
            f"{host.name}: cannot read its SSH host keys: {(error or b'').decode(errors='replace')}"
        )
    saved = lab.host_keys(host)
    if not saved.exists():
        saved.parent.mkdir(mode=0o700, exist_ok=True)
        write_private_file(saved, archive)
    return bytes(archive)


def _new_lab(
    client: docker.DockerClient,
    name: str,
    nodes: int,
    directory: Path,
    user: str,
    private_registry: bool,
    s3: bool,
) -> Lab:
    subnet = choose_subnet(client, name)
    base = subnet.network_address
    roles = roles_for(nodes)
    hosts = [
        LabHost(f"{name}-node-{i + 1}", str(base + FIRST_HOST_OCTET + i), roles[i]) for i in range(nodes)
    ]
    registry_address = f"{base + REGISTRY_OCTET}:{registry.PORT}"
    lab = Lab(name, directory, str(subnet), registry_address, hosts, created_dir=not directory.exists())
    lab.user = user
    if private_registry:
        lab.private_registry = f"{base + PRIVATE_REGISTRY_OCTET}:{registry.PORT}"
        lab.registry_user, lab.registry_password = "lab", secrets.token_urlsafe(18)
    if s3:
        lab_s3.configure(lab, str(base + S3_OCTET))
    return lab


def kubernetes_version(binaries: Path) -> str:
    """The RKE-style version of real server binaries (`kube-apiserver --version` → v1.28.0-rancher1-1)."""
    missing = images.missing_binaries(binaries)
    if missing:
        raise UsageError(
            f"--kubernetes-binaries {binaries}: missing {', '.join(missing)}; the directory needs what a "
            "Kubernetes server release and cri-dockerd 0.3.x give"
        )
    done = subprocess.run([str(binaries / "kube-apiserver"), "--version"], capture_output=True, text=True)
    match = re.search(r"v\d+\.\d+\.\d+", done.stdout)
    if done.returncode != 0 or match is None:
        raise LabError(f"{binaries / 'kube-apiserver'} --version did not name a version: {done.stdout!r}")
    return f"{match.group(0)}-rancher1-1"


def up(
    name: str,
    nodes: int,
    directory: str | None = None,
    progress: Progress = _quiet,
    binaries: Path | None = None,
    user: str = "root",
    private_registry: bool = False,
    s3: bool = False,
    addon_binaries: Path | None = None,
    e2e: Path | None = None,
    rancher_images: Path | None = None,
    oidc_discovery: bool = False,
) -> Lab:
    """Bring up (or complete) lab `name` with `nodes` hosts; return it once every host answers. With
    `binaries` (real Kubernetes server binaries and cri-dockerd) the cluster images run them. With a
    `user` other than root, cluster.yml logs in as that user, who may use Docker but is not root. With
    `private_registry` the cluster pulls from a registry of its own that requires a password. With `s3`
    the lab has an S3 server (moto) for etcd snapshots. With `addon_binaries` the registry serves add-on
    images built from them under their default names, and cluster.yml turns those add-ons on; with `e2e`
    (the conformance suite) it serves the suite's images and the lab has the suite's registry map. With
    `rancher_images` (their sources, `rke_py.lab.rancher`) the cluster runs Rancher's own images, under
    the names RKE gives them, instead of the lab's. With `oidc_discovery` cluster.yml signs service-account
    tokens as a URL issuer, so the apiservers serve OIDC discovery (the conformance suite asks for it)."""
    _check_name(name)
    if values.user(user) or user == "docker":
        raise UsageError(f"--user {user!r} is not a login name rke-py's lab can create")
    version = kubernetes_version(binaries) if binaries is not None else KUBERNETES_VERSION
    if rancher_images is not None and (absent := rancher.missing(rancher_images, binaries)):
        raise UsageError(f"--rancher-images {rancher_images}: missing {', '.join(absent)}")
    if not 1 <= nodes <= 200:
        raise LabError(f"--nodes {nodes}: a lab has 1 to 200 hosts")
    client = docker.from_env()
    path = state_dir(name, directory)
    found = Lab.load(path) if (path / STATE_FILE).exists() else None
    if found is not None and (
        len(found.hosts) != nodes
        or found.user != user
        or bool(found.private_registry) != private_registry
        or bool(found.s3_endpoint) != s3
    ):
        raise LabError(
            f"lab {name!r} exists with {len(found.hosts)} nodes, user {found.user} and"
            f" {'a' if found.private_registry else 'no'} password-protected registry"
            f" and {'an' if found.s3_endpoint else 'no'} S3 server;"
            f" `rke-py lab down --name {name}` first"
        )
    progress("checking lab images")
    cluster_images = () if rancher_images is not None else images.CLUSTER_IMAGES
    names = tuple(n for n in images.BASE_IMAGES if n in cluster_images or n not in images.CLUSTER_IMAGES)
    built = images.ensure_images(client, (*names, "s3") if s3 else names, progress, binaries)
    # A new lab's subnet is chosen and its network made under one lock: two `lab up`s at once would
    # otherwise both find the same /24 free.
    with subnets.claiming():
        lab = found or _new_lab(client, name, nodes, path, user, private_registry, s3)
        lab.rancher = rancher_images is not None
        lab.oidc_discovery = oidc_discovery
        lab.images = {n: built[n].ref for n in cluster_images}
        lab.kubernetes_version = version
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        pubkey = keys.ensure_key(lab.key_path, f"rke-py-lab-{name}")
        lab.save()  # from here on `lab down` finds the directory, and `up` the subnet, if a step below fails
        with registry.in_use():
            _ensure_network(client, lab)  # from here on the network keeps the registry
            reg = registry.ensure(client, built["registry"], progress)
    addon_images = _addon_images(client, lab, addon_binaries, progress) if addon_binaries else {}
    if rancher_images is not None and binaries is not None:
        addon_images |= rancher.images(client, rancher_images, binaries, version, progress)
    test_images = _test_images(client, lab, e2e, progress) if e2e else {}
    registry.attach(client, lab.network, lab.registry.split(":")[0])
    progress(f"starting {nodes} host(s) on {lab.subnet}")
    with ThreadPoolExecutor(max_workers=min(nodes, 8)) as pool:
        futures = [pool.submit(_ensure_host, client, lab, host, built["host"], pubkey) for host in lab.hosts]
        registry.push(client, reg, [built[n] for n in cluster_images], progress)
        registry.publish(client, reg, addon_images | test_images, progress)
        if lab.private_registry:
            address = lab.private_registry.split(":")[0]
            auth = {"username": lab.registry_user, "password": lab.registry_password}
            private = registry.ensure_private(
                client, built["registry"], name, address, lab.registry_user, lab.registry_password, progress
            )
            registry.push(client, private, [built[n] for n in cluster_images], progress, auth)
            registry.publish(client, private, addon_images, progress, auth)
        if lab.s3_endpoint:
            lab_s3.ensure(client, built["s3"], lab, progress)
        known = [line for future in futures for line in future.result()]
    if "nodelocal" in lab.addons and not _has_dummy_links(client.containers.get(lab.hosts[0].name)):
        progress("NodeLocal DNSCache stays off: this kernel cannot make the dummy link node-cache listens on")
        lab.addons.remove("nodelocal")
    lab.known_hosts.write_text("".join(line + "\n" for line in known))
    write_private_file(lab.cluster_yml, clusteryml.render(lab))  # it may hold a registry password
    lab.save()
    progress(f"lab {name!r} is up: {lab.cluster_yml}")
    return lab


def _has_dummy_links(container: Container) -> bool:
    """Whether the kernel the lab runs on makes `dummy` links (some VM kernels lack them)."""
    probe = "ip link add rke-py-probe type dummy && ip link del rke-py-probe"
    return container.exec_run(["sh", "-c", probe]).exit_code == 0


def _addon_images(
    client: docker.DockerClient, lab: Lab, binaries: Path, progress: Progress
) -> dict[str, LabImage]:
    """Build the add-on images of `binaries`; return them by the default names the registry serves them as."""
    out: dict[str, LabImage] = {}
    lab.addons = []
    for binary, (recipe, serves) in addonimages.found(binaries).items():
        image = images.build(client, binary, lambda r=recipe: r(binaries), progress)
        out.update(dict.fromkeys(addonimages.published_names(lab.kubernetes_version, serves), image))
        lab.addons += serves
    return out


def _test_images(
    client: docker.DockerClient, lab: Lab, suite: Path, progress: Progress
) -> dict[str, LabImage]:
    """Write the suite's registry map and build the images it names that the lab can stand in for."""
    write_private_file(lab.e2e_repo_list, testimages.repo_list(lab.registry))
    names = testimages.served(suite, testimages.listed(suite, lab.e2e_repo_list), lab.registry)
    built = {
        key: images.build(
            client, key.replace("/", "-"), lambda r=testimages.RECIPES[key][0]: r(suite), progress
        )
        for key in sorted(set(names.values()))
    }
    return {name: built[key] for name, key in names.items()}


def down(
    name: str, directory: str | None = None, purge_registry: bool = False, progress: Progress = _quiet
) -> None:
    """Remove every container, volume and network of lab `name`, its state directory, and the registry
    when no other lab uses it (its storage only with `purge_registry`)."""
    _check_name(name)
    client = docker.from_env()
    ours = {"label": f"{LABEL}={name}"}
    containers = client.containers.list(all=True, filters=ours)
    if containers:
        progress(f"removing {len(containers)} host(s)")
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda c: c.remove(force=True), containers))
    stuck: LabError | None = None  # the rest is removed all the same, so that only the network is left
    for network in client.networks.list(filters=ours):
        _pod_traffic(network.id, "-D")
        try:
            subnets.remove_network(network)
        except LabError as e:
            stuck = stuck or e
    for volume in client.volumes.list(filters=ours):
        volume.remove(force=True)
    registry.remove_if_unused(client, purge_registry, progress)
    _remove_state(state_dir(name, directory))
    if stuck:
        raise stuck


def _remove_state(path: Path) -> None:
    if not path.is_dir():
        return
    created = True
    if (path / STATE_FILE).exists():
        created = Lab.load(path).created_dir
    if created:
        shutil.rmtree(path)
        return
    cluster_yml = path / CLUSTER_FILE  # the state and kubeconfig of a cluster whose hosts are gone too
    for file in (
        *(path / n for n in _OUR_FILES),
        state_path_for(cluster_yml),
        kubeconfig_path_for(cluster_yml),
    ):
        file.unlink(missing_ok=True)
    shutil.rmtree(path / HOST_KEYS_DIR, ignore_errors=True)


def status(name: str, directory: str | None = None) -> dict[str, Any]:
    """Per host: container state, whether sshd and the inner dockerd answer; and the registry."""
    _check_name(name)
    lab = Lab.load(state_dir(name, directory))
    client = docker.from_env()
    reg = registry.find(client)

    def host_status(host: LabHost) -> dict[str, Any]:
        try:
            container = client.containers.get(host.name)
        except docker.errors.NotFound:
            return {
                "name": host.name,
                "address": host.address,
                "role": host.role,
                "state": "missing",
                "sshd": False,
                "dockerd": False,
            }
        running = container.status == "running"
        return {
            "name": host.name,
            "address": host.address,
            "role": host.role,
            "state": container.status,
            "sshd": running and _ssh_answers(host.address),
            "dockerd": running and _docker_answers(container),
        }

    with ThreadPoolExecutor(max_workers=8) as pool:
        hosts = list(pool.map(host_status, lab.hosts))
    return {
        "name": lab.name,
        "dir": str(lab.dir),
        "cluster_yml": str(lab.cluster_yml),
        "subnet": lab.subnet,
        "registry": {"address": lab.registry, "up": reg is not None and registry.is_up(reg)},
        "hosts": hosts,
    }
