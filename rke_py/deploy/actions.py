"""Every change rke-py makes, as data: one small class per kind of change.

Host actions change one host; cluster actions change objects in the Kubernetes API. Both go through the one
chokepoint (`apply.Applier.execute`), so `rke-py plan` prints exactly what `up` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from rke_py.addons.k8s import SYSTEM, object_ref
from rke_py.config.schema import Node
from rke_py.plan.model import ContainerSpec, FileSpec


class _Change:
    kind: ClassVar[str]
    # The phase that carries it out: cleanup, files, images, etcd, control, worker, removed, objects, nodes,
    # secrets, pods.
    phase: str
    reason: str

    @property
    def target(self) -> str:
        raise NotImplementedError

    def describe(self) -> str:
        text = f"{self.kind} {self.target}"
        return f"{text} ({self.reason})" if self.reason else text


@dataclass(frozen=True)
class WriteFile(_Change):
    kind: ClassVar[str] = "write-file"
    file: FileSpec
    reason: str = ""
    phase = "files"

    @property
    def target(self) -> str:
        return self.file.path


@dataclass(frozen=True)
class PullImage(_Change):
    kind: ClassVar[str] = "pull-image"
    image: str
    reason: str = ""
    phase = "images"

    @property
    def target(self) -> str:
        return self.image


@dataclass(frozen=True)
class RemoveContainer(_Change):
    """A container the host must no longer run (found by observe, so it has an id)."""

    kind: ClassVar[str] = "remove"
    name: str
    id: str
    reason: str = ""
    phase = "cleanup"

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class RestoreContainer(_Change):
    """A container parked by a replace that was interrupted, put back under its name because its
    replacement is missing or stopped (the plane then replaces it properly, health-gated)."""

    kind: ClassVar[str] = "restore"
    name: str
    id: str  # the parked container
    broken_id: str = ""  # the stopped replacement, removed first
    reason: str = ""
    phase = "cleanup"

    @property
    def target(self) -> str:
        return self.name


@dataclass(frozen=True)
class RotateProxy(_Change):
    """A node's nginx-proxy takes apiservers out of rotation before a rolling change replaces them, and
    back after: nginx.conf written, nginx reloaded."""

    kind: ClassVar[str] = "rotate-proxy"
    conf: FileSpec = field(compare=False)
    reason: str = ""
    rkes: bool = False  # RKE's proxy, kept: the configuration is written inside it
    phase = "control"

    @property
    def target(self) -> str:
        return "nginx-proxy"


@dataclass(frozen=True)
class _ContainerChange(_Change):
    spec: ContainerSpec
    phase: str  # the container's plane
    reason: str = ""

    @property
    def target(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class CreateContainer(_ContainerChange):
    kind: ClassVar[str] = "create"


@dataclass(frozen=True)
class ReplaceContainer(_ContainerChange):
    """Rolling replace: the old container is parked, the new one must pass its health check."""

    kind: ClassVar[str] = "replace"
    old_id: str = ""
    old_running: bool = True


@dataclass(frozen=True)
class StartContainer(_ContainerChange):
    kind: ClassVar[str] = "start"
    id: str = ""


@dataclass(frozen=True)
class AddMember(_Change):
    """An etcd node new to a running cluster joins it (`member add` through a running member)."""

    kind: ClassVar[str] = "add-member"
    node: Node = field(compare=False)
    reason: str = "joins the running etcd cluster"
    phase = "etcd"

    @property
    def target(self) -> str:
        return self.node.address


@dataclass(frozen=True)
class RemoveMember(_Change):
    """The etcd member of a host that left cluster.yml (removed through a remaining member)."""

    kind: ClassVar[str] = "remove-member"
    node: Node = field(compare=False)
    reason: str = "left cluster.yml"
    phase = "etcd"

    @property
    def target(self) -> str:
        return self.node.address


@dataclass(frozen=True)
class CleanHost(_Change):
    """Every container and file rke-py put on a host that left cluster.yml."""

    kind: ClassVar[str] = "clean-host"
    address: str
    reason: str = "left cluster.yml"
    phase = "removed"

    @property
    def target(self) -> str:
        return self.address


@dataclass(frozen=True)
class ApplyObject(_Change):
    """An object rke-py keeps in the Kubernetes API, server-side applied under rke-py's field manager."""

    kind: ClassVar[str] = "apply"
    obj: dict[str, Any] = field(compare=False)
    ref: str = ""  # kind/name, e.g. clusterrolebinding/system:node
    reason: str = ""
    phase: str = "objects"  # objects (RBAC, before the workers) or addons (once the nodes are there)
    addon: str = ""  # the add-on it belongs to, e.g. rke-network-plugin
    recreate: bool = False  # deleted first: what changed cannot change in place (a Job's pod template)

    @property
    def target(self) -> str:
        return self.ref


@dataclass(frozen=True)
class SeedObject(_Change):
    """An object the controller manager makes in each namespace, created first on a new cluster and not
    kept (`seeds`)."""

    kind: ClassVar[str] = "seed"
    obj: dict[str, Any] = field(compare=False)
    reason: str = ""
    phase: str = "objects"

    @property
    def target(self) -> str:
        return object_ref(self.obj)


@dataclass(frozen=True)
class DeleteObject(_Change):
    """An object rke-py no longer keeps: an add-on switched off or changed, or RKE's finished add-on Job."""

    kind: ClassVar[str] = "delete"
    api_version: str
    object_kind: str
    namespace: str
    name: str
    ref: str = ""
    reason: str = ""
    phase: str = "addons"
    addon: str = ""
    until_gone: bool = False  # its dependents deleted first, and waited for: what follows needs them gone

    @property
    def target(self) -> str:
        return self.ref


@dataclass(frozen=True)
class ServeOnly(_Change):
    """Point the DNS Services at the new provider's pods alone, before the old provider's pods go."""

    kind: ClassVar[str] = "serve-only"
    deployment: str  # the provider in use, in kube-system
    leaving: str  # the provider's Deployment about to be deleted
    services: tuple[dict[str, Any], ...] = field(compare=False)  # as cluster.yml has them
    reason: str
    addon: str = ""
    phase: str = "addons"

    @property
    def target(self) -> str:
        return f"pods of deployment/{SYSTEM}/{self.deployment}"


@dataclass(frozen=True)
class RewriteSecrets(_Change):
    """Read and write back every Secret, so the apiservers store each as their encryption config says."""

    kind: ClassVar[str] = "rewrite"
    reason: str = ""
    phase = "secrets"

    @property
    def target(self) -> str:
        return "every secret"


@dataclass(frozen=True)
class RestartPods(_Change):
    """Delete an add-on workload's pods for its controller to start again (RKE's RestartClusterPods): after
    a CA rotation or a snapshot restore, what they hold of the API no longer fits it."""

    kind: ClassVar[str] = "restart-pods"
    namespace: str
    selector: str  # the workload's label selector
    reason: str
    ref: str = ""  # the workload, kind/namespace/name
    phase = "pods"

    @property
    def target(self) -> str:
        return f"pods of {self.ref}"


@dataclass(frozen=True)
class _NodeChange(_Change):
    name: str  # the Kubernetes Node's name

    @property
    def target(self) -> str:
        return f"node/{self.name}"


@dataclass(frozen=True)
class SyncNode(_NodeChange):
    """Labels and taints of one Node, as a merge patch computed from what the API holds."""

    kind: ClassVar[str] = "sync-node"
    node: Node = field(compare=False)
    reason: str = ""
    phase = "nodes"


@dataclass(frozen=True)
class DeleteNode(_NodeChange):
    kind: ClassVar[str] = "delete-node"
    reason: str = "left cluster.yml"
    phase = "nodes"


@dataclass(frozen=True)
class Cordon(_NodeChange):
    kind: ClassVar[str] = "cordon"
    reason: str = ""
    phase = "worker"


@dataclass(frozen=True)
class Drain(_NodeChange):
    """Evict the Node's pods, as `kubectl drain` with `upgrade_strategy.node_drain_input`."""

    kind: ClassVar[str] = "drain"
    options: dict[str, Any] = field(compare=False)
    reason: str = ""
    phase = "worker"


@dataclass(frozen=True)
class Uncordon(_NodeChange):
    """Once the Node is Ready again."""

    kind: ClassVar[str] = "uncordon"
    reason: str = ""
    phase = "worker"


HostAction = (
    WriteFile
    | PullImage
    | RemoveContainer
    | RestoreContainer
    | RotateProxy
    | CreateContainer
    | ReplaceContainer
    | StartContainer
    | AddMember
    | RemoveMember
    | CleanHost
)
ClusterAction = (
    ApplyObject
    | SeedObject
    | DeleteObject
    | ServeOnly
    | RewriteSecrets
    | RestartPods
    | SyncNode
    | DeleteNode
    | Cordon
    | Drain
    | Uncordon
)
Action = HostAction | ClusterAction
