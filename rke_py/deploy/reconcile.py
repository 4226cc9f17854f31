"""Hosts that left cluster.yml and etcd members that come and go, as RKE's reconcile did: a removed host
leaves etcd and is cleaned (its Node is deleted with the cluster objects); an etcd node new to a running
cluster joins with `member add`. Without this a removed controlplane host would keep serving an apiserver
that nothing manages any more.
"""

from __future__ import annotations

import json
import logging
import shlex
import time

from rke_py.config.schema import Node
from rke_py.deploy.actions import CleanHost, HostAction, RemoveMember
from rke_py.deploy.facts import HostFacts
from rke_py.errors import ApplyError, UsageError
from rke_py.hosts.base import Docker, HostConnection
from rke_py.plan.components import REGISTRY, Component
from rke_py.templating import hostport

log = logging.getLogger("rke_py.deploy")
POD_LABEL = "io.kubernetes.pod.name"  # on every container cri-dockerd starts for the kubelet
CNI_BRIDGE = "cni0"  # the bridge plugin's default device


def removed_nodes(previous: list[Node], current: list[Node]) -> list[Node]:
    """Nodes of the last applied config whose address is no longer in cluster.yml (RKE's identity key)."""
    kept = {n.address for n in current}
    return [n for n in previous if n.address not in kept]


def joining_etcd_nodes(applied: list[Node], etcd_nodes: list[Node]) -> list[Node]:
    """etcd nodes new to a cluster that already runs etcd: they join with `member add`, as in RKE."""
    before = {n.address for n in applied if n.has("etcd")}
    return [n for n in etcd_nodes if before and n.address not in before]


def update_only(
    applied: list[Node], nodes: list[Node], joining: list[Node], actions: dict[str, list[HostAction]]
) -> dict[str, list[HostAction]]:
    """RKE's `up --update-only` on a running cluster: the hosts it already had are left as they are, only
    hosts new to it get their containers, and hosts that left are still cleaned. On a new cluster, or when an
    etcd node joins, every host is brought up to date (as RKE). A new controlplane host is refused: RKE
    would give it only the worker plane, an apiserver-less controlplane node."""
    if not applied or joining:
        if joining:
            log.info("--update-only: etcd hosts join, so every host is brought up to date (as RKE)")
        return actions
    had = {n.address for n in applied}
    control = [n.address for n in nodes if n.address not in had and n.has("controlplane")]
    if control:
        raise UsageError(
            f"--update-only deploys new worker hosts only, and {', '.join(control)} is a new controlplane "
            "host; nothing was changed: run `up` without --update-only"
        )
    listed = {n.address for n in nodes}
    kept = [a for a in had & listed if actions.get(a)]
    if kept:
        log.info("--update-only: left as they are: %s", ", ".join(sorted(kept)))
    return {address: [] if address in kept else todo for address, todo in actions.items()}


def leaving_actions(node: Node, reachable: bool) -> list[HostAction]:
    """What `up` does about a host that left: its etcd member first, then its containers and files."""
    actions: list[HostAction] = []
    if node.has("etcd"):
        actions.append(RemoveMember(node=node))
    if reachable:
        actions.append(CleanHost(node.address))
    return actions


def peer_url(node: Node) -> str:
    return f"https://{hostport(node.internal_address or node.address, 2380)}"


def remove_etcd_members(docker: Docker, via: str, gone: list[Node]) -> list[str]:
    """Remove the members of `gone` through the etcd container of host `via`; returns the names removed."""
    members = json.loads(_etcdctl(docker, via, "member", "list", "-w", "json")).get("members", [])
    removed = []
    for node in gone:
        for member in members:
            if peer_url(node) in member.get("peerURLs", []) or member.get("name") == f"etcd-{node.name}":
                log.info(
                    "%s: removing etcd member %s (%s left cluster.yml)", via, member.get("name"), node.address
                )
                _member_change(docker, via, "member", "remove", f"{int(member['ID']):x}")
                removed.append(member.get("name", ""))
    return removed


def add_etcd_member(docker: Docker, via: str, node: Node) -> None:
    """`member add` through host `via`, unless a member already has the node's peer URL (a run that
    added it and failed before the member started)."""
    peer = peer_url(node)
    members = json.loads(_etcdctl(docker, via, "member", "list", "-w", "json")).get("members", [])
    if any(peer in m.get("peerURLs", []) for m in members):
        return
    log.info("%s: adding etcd member etcd-%s (%s)", via, node.name, peer)
    _member_change(docker, via, "member", "add", f"etcd-{node.name}", f"--peer-urls={peer}")


def _member_change(docker: Docker, via: str, *args: str, attempts: int = 10) -> None:
    """etcd refuses a member add or remove that would leave fewer active members than a quorum; a member
    that just (re)started counts as active only after a few seconds, so retry for a while on that answer."""
    for attempt in range(attempts):
        try:
            _etcdctl(docker, via, *args)
            return
        except ApplyError as exc:
            if "unhealthy cluster" not in str(exc) or attempt + 1 == attempts:
                raise
            time.sleep(3)


def _etcdctl(docker: Docker, host: str, *args: str) -> str:
    """etcdctl inside the etcd container, as an argument vector (no shell): its ETCDCTL_* environment
    already names the certificates."""
    code, out = docker.exec("etcd", ["etcdctl", *args])
    if code:
        raise ApplyError(
            host, "etcd: member change", f"etcdctl {shlex.join(args)} failed: {out.strip()[-300:]}"
        )
    return out


def clean_host(
    host: HostConnection, facts: HostFacts, prefix: str, registry: tuple[Component, ...] = REGISTRY
) -> list[str]:
    """Remove rke-py's containers (worker plane first, as RKE), what else observe found of ours, the pods'
    containers the kubelet left, and the files, mounts and network devices they made."""
    order = [c.name for c in reversed(registry)]
    found = sorted(facts.containers.values(), key=lambda c: order.index(c.name))
    found += [facts.others[name] for name in sorted(facts.others)]
    for container in found:
        host.docker.remove(container.id)
    for pod in host.docker.containers(POD_LABEL):
        host.docker.remove(pod.id)
    host.run_as_root(clean_script(prefix))
    return [c.name for c in found]


def clean_script(prefix: str) -> str:
    """Unmount what pods left mounted under the kubelet's directory, delete the CNI bridge (its routes go
    with it), then wipe the directories."""
    kubelet = shlex.quote(f"{prefix.rstrip('/')}/var/lib/kubelet")
    return (
        f"awk -v d={kubelet} 'index($2, d\"/\") == 1 {{print $2}}' /proc/mounts | sort -r | "
        'while read -r m; do umount "$m" 2>/dev/null; done; '
        f"ip link delete {CNI_BRIDGE} 2>/dev/null; "
        "rm -rf " + " ".join(shlex.quote(d) for d in cleaned_dirs(prefix))
    )


def cleaned_dirs(prefix: str) -> list[str]:
    """What RKE's kube-cleaner wipes, plus what rke-py's containers write: the audit log, the kubelet's and
    cri-dockerd's state, and the pods' logs."""
    p = prefix.rstrip("/")
    return [
        f"{p}/etc/kubernetes",
        f"{p}/var/lib/etcd",
        f"{p}/var/lib/cni",
        "/etc/cni",
        "/opt/cni",
        "/var/run/calico",
        f"{p}/var/log/kube-audit",
        f"{p}/var/lib/kubelet",
        f"{p}/var/lib/cri-dockerd",
        "/var/log/pods",
        "/var/log/containers",
    ]
