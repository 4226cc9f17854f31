"""Hosts that left cluster.yml: their etcd member is removed, their containers and files are cleaned
and their Kubernetes Node is deleted, as RKE's reconcile did. Without this a removed controlplane host
would keep serving an apiserver that nothing manages any more.
"""

from __future__ import annotations

import json
import logging
import shlex
import time

import docker

from rke_py.config.schema import Node
from rke_py.deploy.actions import Action
from rke_py.deploy.observe import COMPONENTS
from rke_py.errors import ApplyError
from rke_py.verify.kubeapi import KubeAPI, KubeAPIError

log = logging.getLogger("rke_py.deploy")


def removed_nodes(previous: list[Node], current: list[Node]) -> list[Node]:
    """Nodes of the last applied config whose address is no longer in cluster.yml (RKE's identity key)."""
    kept = {n.address for n in current}
    return [n for n in previous if n.address not in kept]


def joining_etcd_nodes(applied: list[Node], etcd_nodes: list[Node]) -> list[Node]:
    """etcd nodes new to a cluster that already runs etcd: they join with `member add`, as in RKE."""
    before = {n.address for n in applied if n.has("etcd")}
    return [n for n in etcd_nodes if before and n.address not in before]


def leaving_actions(node: Node, target) -> list[Action]:
    """What `up` does about a host that left: its etcd member first, then its containers and files."""
    actions = []
    if node.has("etcd"):
        actions.append(Action("remove-member", "etcd", node.address, "left cluster.yml", node=node))
    if target is not None:
        actions.append(Action("clean-host", "removed", node.address, "left cluster.yml"))
    return actions


def remove_etcd_members(client: docker.DockerClient, via: str, gone: list[Node]) -> list[str]:
    """Remove the members of `gone` through the etcd container of host `via`; returns the names removed."""
    members = json.loads(_etcdctl(client, via, "member list -w json")).get("members", [])
    removed = []
    for node in gone:
        peer = f"https://{node.internal_address or node.address}:2380"
        for member in members:
            if peer in member.get("peerURLs", []) or member.get("name") == f"etcd-{node.name}":
                log.info(
                    "%s: removing etcd member %s (%s left cluster.yml)", via, member.get("name"), node.address
                )
                _member_change(client, via, f"member remove {int(member['ID']):x}")
                removed.append(member.get("name", ""))
    return removed


def add_etcd_member(client: docker.DockerClient, via: str, node: Node) -> None:
    """`member add` through host `via`, unless a member already has the node's peer URL (a run that
    added it and failed before the member started)."""
    peer = f"https://{node.internal_address or node.address}:2380"
    members = json.loads(_etcdctl(client, via, "member list -w json")).get("members", [])
    if any(peer in m.get("peerURLs", []) for m in members):
        return
    log.info("%s: adding etcd member etcd-%s (%s)", via, node.name, peer)
    _member_change(client, via, f"member add etcd-{shlex.quote(node.name)} --peer-urls={peer}")


def _member_change(client: docker.DockerClient, via: str, args: str, attempts: int = 10) -> None:
    """etcd refuses a member add or remove that would leave fewer active members than a quorum; a member
    that just (re)started counts as active only after a few seconds, so retry for a while on that answer."""
    for attempt in range(attempts):
        try:
            _etcdctl(client, via, args)
            return
        except ApplyError as exc:
            if "unhealthy cluster" not in str(exc) or attempt + 1 == attempts:
                raise
            time.sleep(3)


def _etcdctl(client: docker.DockerClient, host: str, args: str) -> str:
    """etcdctl inside the etcd container: its ETCDCTL_* environment already names the certificates."""
    exec_id = client.api.exec_create("etcd", ["sh", "-c", f"etcdctl {args}"])["Id"]
    out = client.api.exec_start(exec_id).decode(errors="replace")
    if client.api.exec_inspect(exec_id).get("ExitCode"):
        raise ApplyError(host, "etcd: member change", f"etcdctl {args} failed: {out.strip()[-300:]}")
    return out


def clean_host(client: docker.DockerClient, run, prefix: str) -> list[str]:
    """Remove rke-py's containers (and leftovers of interrupted replaces) and the files it wrote."""
    removed = []
    names = {c["Names"][0].lstrip("/"): c["Id"] for c in client.api.containers(all=True)}
    for name in reversed(COMPONENTS):
        for candidate in (name, f"old-{name}"):
            if candidate in names:
                client.api.remove_container(names[candidate], force=True)
                removed.append(candidate)
    run("rm -rf " + " ".join(shlex.quote(d) for d in cleaned_dirs(prefix)))
    return removed


def cleaned_dirs(prefix: str) -> list[str]:
    """What RKE's kube-cleaner wipes, plus the audit log directory rke-py's apiserver writes."""
    p = prefix.rstrip("/")
    return [
        f"{p}/etc/kubernetes",
        f"{p}/var/lib/etcd",
        f"{p}/var/lib/cni",
        "/etc/cni",
        "/opt/cni",
        "/var/run/calico",
        f"{p}/var/log/kube-audit",
    ]


def delete_nodes(api: KubeAPI, gone: list[Node]) -> None:
    for node in gone:
        try:
            api.request("DELETE", f"/api/v1/nodes/{node.name}")
        except KubeAPIError as exc:
            if "HTTP 404" not in str(exc):
                log.warning("could not delete Node %s: %s", node.name, exc)
