"""What a lab is made of, and where its files live.

Everything the lab creates in Docker carries the label `io.rke-py.lab=<lab name>` (the shared registry
carries `io.rke-py.lab.role=registry` instead), so `lab down` finds it by label, even without `lab.json`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rke_py.errors import RkePyError
from rke_py.files import write_private_file

LABEL = "io.rke-py.lab"
LABEL_ROLE = "io.rke-py.lab.role"
STATE_FILE = "lab.json"
KEY_FILE = "id_ed25519"
KNOWN_HOSTS_FILE = "known_hosts"
CLUSTER_FILE = "cluster.yml"
HOST_KEYS_DIR = "host-keys"
KUBERNETES_VERSION = "v1.30.4-rancher1-1"


class LabError(RkePyError):
    """The lab could not be built, found or removed."""


def labs_root() -> Path:
    """Where labs keep their directories by default, and the locks they share (`machine_lock`)."""
    return Path.home() / ".local" / "share" / "rke-py" / "lab"


@contextlib.contextmanager
def machine_lock(name: str, how: int = fcntl.LOCK_EX) -> Iterator[None]:
    """A lock every lab of this machine's user sees, whatever directory each keeps its files in: what two
    `lab up`s (or an `up` and a `down`) at once would otherwise both change."""
    path = labs_root() / f".{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as held:
        fcntl.flock(held, how)
        yield


def state_dir(name: str, override: str | os.PathLike[str] | None = None) -> Path:
    """The lab's own directory: `override`, else $RKE_PY_LAB_DIR, else ~/.local/share/rke-py/lab/<name>."""
    if override:
        return Path(override).expanduser().absolute()
    if os.environ.get("RKE_PY_LAB_DIR"):
        return Path(os.environ["RKE_PY_LAB_DIR"]).expanduser().absolute()
    return labs_root() / name


@dataclass
class LabHost:
    name: str  # container name and hostname, `<lab>-node-<i>`
    address: str  # its IP on the lab network; cluster.yml's `address`
    role: list[str] = field(default_factory=list)


@dataclass
class Lab:
    """A lab as `lab up` left it; the handle tests and the CLI work with."""

    name: str
    dir: Path
    subnet: str
    registry: str  # host:port at which lab hosts reach the registry
    hosts: list[LabHost] = field(default_factory=list)
    images: dict[str, str] = field(default_factory=dict)  # lab image name -> ref without registry
    created_dir: bool = True  # remove the whole directory on `lab down` only if `lab up` made it
    kubernetes_version: str = KUBERNETES_VERSION  # what the kube-* images run (real binaries: theirs)
    user: str = "root"  # the SSH user in cluster.yml; another user is in the hosts' docker group
    # With a password-protected registry: where hosts reach it, and its one user's credentials.
    private_registry: str = ""
    registry_user: str = ""
    registry_password: str = ""
    # With an S3 server (moto): where hosts and this machine reach it over HTTPS, its keys and CA.
    s3_endpoint: str = ""
    s3_bucket: str = ""
    s3_access_key: str = ""
    s3_secret_key: str = ""
    s3_ca: str = ""
    s3_server: tuple[str, str] = ("", "")  # its certificate and key
    addons: list[str] = field(default_factory=list)  # system_images keys served from --addon-binaries
    rancher: bool = False  # the registry serves Rancher's images (--rancher-images): cluster.yml names none
    oidc_discovery: bool = False  # cluster.yml has the apiservers serve OIDC discovery (a conformance spec)

    @property
    def network(self) -> str:
        return f"{self.name}-net"

    @property
    def cluster_yml(self) -> Path:
        return self.dir / CLUSTER_FILE

    @property
    def key_path(self) -> Path:
        return self.dir / KEY_FILE

    @property
    def known_hosts(self) -> Path:
        return self.dir / KNOWN_HOSTS_FILE

    def host_keys(self, host: LabHost) -> Path:
        """`host`'s SSH host keys (a tar of them), kept from its first start so a host made anew keeps them:
        the cluster state pins them, and would refuse a host whose keys changed."""
        return self.dir / HOST_KEYS_DIR / f"{host.name}.tar"

    @property
    def flannel(self) -> bool:
        """Whether the lab serves flannel's images (--addon-binaries): then the cluster runs RKE's flannel
        and the hosts bring no pod network of their own."""
        return {"flannel", "flannel_cni"} <= set(self.addons)

    @property
    def e2e_repo_list(self) -> Path:
        """The conformance suite's registry map, there when the lab serves the suite's images (--e2e)."""
        return self.dir / "e2e-repo-list.yaml"

    def save(self) -> None:
        data = asdict(self) | {"dir": str(self.dir)}
        write_private_file(self.dir / STATE_FILE, json.dumps(data, indent=2) + "\n")  # may hold a password

    @classmethod
    def load(cls, directory: Path) -> Lab:
        path = directory / STATE_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise LabError(
                f"no lab at {directory} ({STATE_FILE} not found); create one with `rke-py lab up`"
            ) from None
        data["dir"] = Path(data["dir"])
        data["hosts"] = [LabHost(**h) for h in data["hosts"]]
        data["s3_server"] = tuple(data.get("s3_server", ("", "")))
        return cls(**data)


def roles_for(count: int) -> list[list[str]]:
    """Roles by lab size: one node does everything; two split off a worker; three give every node every
    role (a cluster needs a worker, as RKE checks); more give the first three etcd+controlplane and the
    rest worker."""
    if count == 2:
        return [["etcd", "controlplane", "worker"], ["worker"]]
    if count <= 3:
        return [["etcd", "controlplane", "worker"] for _ in range(count)]
    return [["etcd", "controlplane"] if i < 3 else ["worker"] for i in range(count)]
