"""Rolling changes, RKE's way (`upgrade_strategy`): which hosts of a plane change together, and what is
done to their Nodes around it.

Hosts whose plane only gets new containers (a new cluster, a new host) start together. Hosts where running
containers are replaced go in batches: `max_unavailable_controlplane` controlplane hosts at a time,
`max_unavailable_worker` other hosts at a time, each batch healthy before the next. In the worker plane a
registered Node is cordoned (and drained with `drain: true`) before its kubelet is touched, and uncordoned
once it is Ready again.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rke_py.config.schema import ClusterConfig, Node
from rke_py.deploy import actions as a
from rke_py.kube.api import node_ready
from rke_py.plan import kube_apiserver, nginx_proxy
from rke_py.plan.model import FileSpec

MAX_BATCH = 50  # RKE caps max_unavailable at 50
COUNT = re.compile(r"([0-9]+)(%?)\Z")


def max_unavailable(value: str, hosts: int) -> int:
    """A count, or a percentage of `hosts` rounded down; at least 1 and at most 50 (RKE's rules)."""
    match = COUNT.match(value.strip())
    if not match:
        return 1
    number = int(match[1])
    if match[2]:
        number = hosts * number // 100
    return max(1, min(MAX_BATCH, number))


def worker_allowance(config: ClusterConfig) -> int:
    """How many worker hosts may be unavailable at once: `max_unavailable_worker` of the workers."""
    return max_unavailable(config.upgrade_strategy.max_unavailable_worker, len(config.hosts("worker")))


@dataclass
class Batch:
    nodes: list[Node]
    rolling: bool  # running containers are replaced: health-gated, and Nodes cordoned in the worker plane
    not_ready: bool = False  # workers already NotReady: changed first, neither cordoned nor waited for
    before: list[a.ClusterAction] = field(default_factory=list)  # cordon, drain
    after: list[a.ClusterAction] = field(default_factory=list)  # uncordon
    # proxies taking the batch's apiservers out of rotation (before) and back (after): node address, action
    proxies_out: list[tuple[str, a.RotateProxy]] = field(default_factory=list)
    proxies_back: list[tuple[str, a.RotateProxy]] = field(default_factory=list)


def drain_options(config: ClusterConfig) -> dict[str, Any]:
    """`node_drain_input` with RKE's defaults for what it leaves out."""
    given = config.upgrade_strategy.node_drain_input or {}
    return {
        "force": bool(given.get("force", False)),
        "ignore_daemonsets": bool(given.get("ignore_daemonsets", True)),
        "delete_empty_dir_data": bool(
            given.get("delete_empty_dir_data", given.get("delete_local_data", False))
        ),
        "grace_period": int(given.get("grace_period", -1)),
        "timeout": int(given.get("timeout", 120)),
    }


def schedule(
    config: ClusterConfig,
    plane: str,
    nodes: Sequence[Node],
    host_actions: dict[str, list[a.HostAction]],
    registered: dict[str, dict[str, Any]] | None,
    proxies: Mapping[str, bool] | None = None,
    unreachable: int = 0,
    together: bool = False,
) -> list[Batch]:
    """The batches of `plane`, in order: new containers only first (together), then the rolling batches,
    controlplane hosts before the others. `proxies`: the addresses of nodes with a running nginx-proxy,
    each saying whether it is RKE's.

    As RKE, workers that are NotReady already are changed first, all together (they serve nothing now), and
    count against max_unavailable_worker with the `unreachable` ones: the other batches are that much
    smaller (at least 1). `together`: every host at once, as NotReady ones (a new CA: a worker the new
    apiservers do not know yet serves nothing, so batches would only keep the others NotReady longer)."""
    changing = [n for n in nodes if any(x.phase == plane for x in host_actions.get(n.address, []))]
    new_only = {
        n.address
        for n in changing
        if all(isinstance(x, a.CreateContainer) for x in host_actions[n.address] if x.phase == plane)
    }
    fresh = [n for n in changing if n.address in new_only]
    rolling = [n for n in changing if n.address not in new_only]
    batches = [Batch(fresh, rolling=False)] if fresh else []
    if together and rolling:
        return [*batches, Batch(rolling, rolling=True, not_ready=True)]
    strategy = config.upgrade_strategy
    control = [n for n in rolling if n.has("controlplane")]
    down = set(not_ready(config, nodes, registered))
    others = [n for n in rolling if not n.has("controlplane") and n.address not in down]
    size_cp = max_unavailable(strategy.max_unavailable_controlplane, len(config.hosts("controlplane")))
    size_w = worker_allowance(config)
    size_w = max(1, size_w - unreachable - len(down))
    batches += [Batch(control[i : i + size_cp], rolling=True) for i in range(0, len(control), size_cp)]
    stale = [n for n in rolling if n.address in down]
    if stale:
        batches.append(Batch(stale, rolling=True, not_ready=True))
    batches += [Batch(others[i : i + size_w], rolling=True) for i in range(0, len(others), size_w)]
    for batch in batches:
        if batch.rolling and not batch.not_ready and plane == "worker":
            _around(config, batch, registered or {})
        if batch.rolling and plane == "control":
            _rotate(config, batch, host_actions, proxies or {})
    return batches


def not_ready(
    config: ClusterConfig, nodes: Sequence[Node], registered: dict[str, dict[str, Any]] | None
) -> list[str]:
    """Addresses of the worker-only hosts among `nodes` whose registered Node is NotReady."""
    return [
        n.address
        for n in nodes
        if n.has("worker")
        and not (n.has("controlplane") or n.has("etcd"))
        and registered
        and n.name in registered
        and not node_ready(registered[n.name])
    ]


def _rotate(
    config: ClusterConfig,
    batch: Batch,
    host_actions: dict[str, list[a.HostAction]],
    proxies: Mapping[str, bool],
) -> None:
    """A proxy connects before it knows whether an apiserver is ready (a new one answers 403 until its
    authorizers synced), so the proxies stop using the batch's apiservers while they are replaced."""
    replaced = tuple(
        n.internal_address
        for n in batch.nodes
        if any(
            isinstance(x, a.ReplaceContainer) and x.target == kube_apiserver.NAME
            for x in host_actions[n.address]
        )
    )
    if not replaced:
        return
    for address, rkes in proxies.items():
        path = nginx_proxy.RKE_CONF if rkes else nginx_proxy.conf_path(config)
        out = FileSpec(path, nginx_proxy.render(config, replaced, rkes).encode(), 0o644)
        back = FileSpec(path, nginx_proxy.render(config, (), rkes).encode(), 0o644)
        which = ", ".join(replaced)
        batch.proxies_out.append((address, a.RotateProxy(out, f"{which} out of rotation", rkes)))
        batch.proxies_back.append((address, a.RotateProxy(back, f"{which} back", rkes)))


def _around(config: ClusterConfig, batch: Batch, registered: dict[str, dict[str, Any]]) -> None:
    """Cordon (and drain) the batch's registered, schedulable Nodes before; uncordon them after."""
    for node in batch.nodes:
        current = registered.get(node.name)
        if current is None or (current.get("spec") or {}).get("unschedulable"):
            continue  # not registered, or cordoned by someone else: left as it is
        batch.before.append(a.Cordon(node.name, "before its kubelet is replaced"))
        if config.upgrade_strategy.drain:
            batch.before.append(a.Drain(node.name, drain_options(config), "upgrade_strategy.drain"))
        batch.after.append(a.Uncordon(node.name, "Ready again"))


def labelled(batches: list[Batch], host_actions: dict[str, list[a.HostAction]], plane: str) -> None:
    """Say in each host action's reason which batch it belongs to, so `plan` shows the order."""
    rolling = [b for b in batches if b.rolling]
    for index, batch in enumerate(rolling, 1):
        for node in batch.nodes:
            host_actions[node.address] = [
                dataclasses.replace(x, reason=f"{x.reason}; batch {index} of {len(rolling)}")
                if x.phase == plane
                else x
                for x in host_actions[node.address]
            ]
