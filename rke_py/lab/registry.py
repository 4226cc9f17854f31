"""The lab registry: Debian's docker-registry in a container, shared by every lab on this machine.

It sits on a bridge network of its own with port 5000 published on 127.0.0.1 only (Docker treats
loopback registries as insecure, so pushes need no TLS), and joins each lab's internal network at a
fixed address, where lab hosts pull from it as an insecure registry. Lab clusters name it in
`private_registries` with `is_default: true`, exactly like an air-gapped site.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import io
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable

import bcrypt
import docker
from docker.models.containers import Container

from rke_py.lab import subnets
from rke_py.lab.images import LabImage, Progress, lab_file
from rke_py.lab.state import LABEL, LABEL_ROLE, LabError, machine_lock

NAME = "rke-py-lab-registry"
NETWORK = "rke-py-lab-registry"
VOLUME = "rke-py-lab-registry"
PORT = 5000
_MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
    ]
)


def in_use() -> contextlib.AbstractContextManager[None]:
    """While held, no `lab down` removes the registry. `lab up` holds it from before the registry is
    ensured until its lab's network (which keeps the registry from then on) exists, and a push without a
    lab until it is done: another lab's `down` between the two would otherwise take the registry away."""
    return machine_lock("registry", fcntl.LOCK_SH)


def _labels() -> dict[str, str]:
    return {LABEL_ROLE: "registry"}


def find(client: docker.DockerClient) -> Container | None:
    try:
        return client.containers.get(NAME)
    except docker.errors.NotFound:
        return None


def ensure(client: docker.DockerClient, image: LabImage, progress: Progress = lambda _: None) -> Container:
    """Start the registry if it is not running, and wait until its API answers on 127.0.0.1."""
    container = find(client)
    if container is None:
        try:
            container = _create(client, image, progress)
        except docker.errors.APIError as exc:
            container = find(client)  # another `lab up` created it at the same moment
            if container is None:
                raise LabError(f"cannot start the lab registry: {exc.explanation or exc}") from exc
    container.reload()
    if container.status != "running":
        container.start()
    _wait_ready(container)
    return container


def _create(client: docker.DockerClient, image: LabImage, progress: Progress) -> Container:
    progress("starting the lab registry")
    if not client.networks.list(filters={"label": f"{LABEL_ROLE}=registry"}):
        # Explicit: a subnet from Docker's default pools could cover the labs' 172.30.0.0/16.
        subnet = subnets.free_subnet(client, 29, 254)
        client.networks.create(NETWORK, driver="bridge", labels=_labels(), ipam=subnets.ipam(subnet))
    if not client.volumes.list(filters={"label": f"{LABEL_ROLE}=registry"}):
        client.volumes.create(VOLUME, labels=_labels())
    return client.containers.run(
        image.ref,
        name=NAME,
        detach=True,
        labels=_labels(),
        network=NETWORK,
        ports={f"{PORT}/tcp": ("127.0.0.1", None)},
        volumes={VOLUME: {"bind": "/var/lib/docker-registry", "mode": "rw"}},
        restart_policy={"Name": "unless-stopped"},
    )


def ensure_private(
    client: docker.DockerClient,
    image: LabImage,
    lab: str,
    address: str,
    user: str,
    password: str,
    progress: Progress = lambda _: None,
) -> Container:
    """A lab's own registry that answers only with `user`'s password (htpasswd, bcrypt), joined to the lab's
    network at `address`: the images a cluster pulls from a registry that needs credentials. It goes with
    the lab (`lab down`); its port on 127.0.0.1 is for pushing."""
    name = f"{lab}-registry"
    try:
        container = client.containers.get(name)
    except docker.errors.NotFound:
        progress("starting the lab's password-protected registry")
        container = client.containers.create(
            image.ref,
            name=name,
            labels={LABEL: lab, LABEL_ROLE: "private-registry"},
            network=NETWORK,
            ports={f"{PORT}/tcp": ("127.0.0.1", None)},
            restart_policy={"Name": "unless-stopped"},
        )
        container.put_archive("/etc/docker/registry", _auth_files(user, password))
        client.networks.get(f"{lab}-net").connect(container, ipv4_address=address)
    container.reload()
    if container.status != "running":
        container.start()
    _wait_ready(container, expect=401)
    return container


def _auth_files(user: str, password: str) -> bytes:
    # The registry checks the hash on every request of every pull: the default cost (12, ~0.4 s here) made
    # a 5-node up 24 s slower. The password is random and the registry lives on the lab's own network.
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    config = lab_file("registry-config.yml") + (
        "auth:\n  htpasswd:\n    realm: rke-py-lab\n    path: /etc/docker/registry/htpasswd\n"
    )
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in (("config.yml", config.encode()), ("htpasswd", f"{user}:{hashed}\n".encode())):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def local_port(container: Container) -> int:
    """The 127.0.0.1 port the registry is published on (Docker picks it; it changes on restart)."""
    container.reload()
    bindings = container.attrs["NetworkSettings"]["Ports"].get(f"{PORT}/tcp") or []
    for binding in bindings:
        if binding.get("HostIp") == "127.0.0.1" and binding.get("HostPort"):
            return int(binding["HostPort"])
    raise LabError(f"registry container {NAME} has no port published on 127.0.0.1")


def _request(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, str]:
    """Status of a registry request and the manifest digest it names (empty when none)."""
    request = urllib.request.Request(
        url, method=method, headers={"Accept": _MANIFEST_TYPES, **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers.get("Docker-Content-Digest", "")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, ""


def is_up(container: Container, expect: int = 200) -> bool:
    """The registry answers its API (`expect` 401: it asks for a password, as it should)."""
    try:
        return _request(f"http://127.0.0.1:{local_port(container)}/v2/")[0] == expect
    except LabError:
        return False


def _wait_ready(container: Container, timeout: float = 30, expect: int = 200) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_up(container, expect):
            return
        time.sleep(0.2)
    raise LabError(f"the lab registry did not answer within {timeout:.0f}s; see `docker logs {NAME}`")


def _auth_headers(auth: dict[str, str] | None) -> dict[str, str]:
    if not auth:
        return {}
    token = base64.b64encode(f"{auth['username']}:{auth['password']}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def _manifest(port: int, path: str, tag: str, auth: dict[str, str] | None = None) -> tuple[int, str]:
    return _request(f"http://127.0.0.1:{port}/v2/{path}/manifests/{tag}", "HEAD", _auth_headers(auth))


def has_image(port: int, image: LabImage, auth: dict[str, str] | None = None) -> bool:
    return _manifest(port, image.path, image.tag, auth)[0] == 200


def _pushing() -> contextlib.AbstractContextManager[None]:
    """Held from asking whether the registry has an image through pushing it. A push tags the image with
    the registry's name and removes that tag after: two `lab up`s pushing the same new image at once shared
    the tag, and the second to remove it failed ("No such image"), or a push lost it half-way."""
    return machine_lock("push")


def _push(
    client: docker.DockerClient, port: int, ref: str, path: str, tag: str, auth: dict[str, str] | None
) -> None:
    repository = f"127.0.0.1:{port}/{path}"
    client.images.get(ref).tag(repository, tag)
    try:
        for event in client.api.push(repository, tag, stream=True, decode=True, auth_config=auth):
            if "error" in event:
                raise LabError(f"pushing {ref} to the lab registry as {path}:{tag}: {event['error']}")
    finally:
        client.images.remove(f"{repository}:{tag}")


def push(
    client: docker.DockerClient,
    container: Container,
    images: Iterable[LabImage],
    progress: Progress,
    auth: dict[str, str] | None = None,
) -> list[LabImage]:
    """Push each image the registry does not already hold (with `auth` to one that needs a password)."""
    port = local_port(container)
    pushed = []
    for image in images:
        with _pushing():
            if has_image(port, image, auth):
                continue
            progress(f"pushing {image.ref} to the lab registry")
            _push(client, port, image.ref, image.path, image.tag, auth)
        pushed.append(image)
    return pushed


def publish(
    client: docker.DockerClient,
    container: Container,
    names: dict[str, LabImage],
    progress: Progress,
    auth: dict[str, str] | None = None,
) -> None:
    """Serve each image also under `name` (path:tag, e.g. an upstream image's), as an air-gapped site's
    registry holds its copies. A name that already serves the same manifest is left alone; one that
    serves an older build is pushed again."""
    push(client, container, set(names.values()), progress, auth)
    port = local_port(container)
    for name, image in sorted(names.items()):
        path, tag = name.rsplit(":", 1)
        with _pushing():
            if _manifest(port, path, tag, auth)[1] == _manifest(port, image.path, image.tag, auth)[1]:
                continue
            progress(f"pushing {image.ref} to the lab registry as {name}")
            _push(client, port, image.ref, path, tag, auth)


def attach(client: docker.DockerClient, network: str, address: str) -> None:
    """Join a lab's network at `address` (where that lab's hosts find the registry)."""
    container = find(client)
    if container is None:
        raise LabError("the lab registry is not running")
    if network not in container.attrs["NetworkSettings"]["Networks"]:
        client.networks.get(network).connect(container, ipv4_address=address)


def remove_if_unused(client: docker.DockerClient, purge: bool, progress: Progress) -> bool:
    """Remove the registry (and with `purge` its storage) when no lab network is left and nothing holds it
    `in_use`; True if removed."""
    with machine_lock("registry"):
        if client.networks.list(filters={"label": LABEL}):
            return False
        container = find(client)
        if container is not None:
            progress("removing the lab registry")
            container.remove(force=True)
        for network in client.networks.list(filters={"label": f"{LABEL_ROLE}=registry"}):
            subnets.remove_network(network)
        if purge:
            for volume in client.volumes.list(filters={"label": f"{LABEL_ROLE}=registry"}):
                volume.remove(force=True)
        return True
