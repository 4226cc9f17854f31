"""Tables and JSON documents for actions and verify reports, shared by up, plan and status."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from rke_py.config.schema import ClusterConfig
from rke_py.deploy.actions import Action
from rke_py.deploy.up import UpResult
from rke_py.verify.checks import Report

LISTED = 50  # rows shown one by one; above that, alike rows are counted instead
CLUSTER = "(cluster)"  # the host column of an action on the cluster's objects


def action_doc(action: Action) -> dict[str, str]:
    doc = {"kind": action.kind, "phase": action.phase, "target": action.target, "reason": action.reason}
    addon = getattr(action, "addon", "")
    return {**doc, "addon": addon} if addon else doc


def actions_doc(config: ClusterConfig, actions: Mapping[str, Sequence[Action]]) -> list[dict[str, Any]]:
    """Per host, in cluster.yml order, then hosts that left cluster.yml (roles: [])."""
    nodes = {n.address: n for n in config.nodes}
    return [
        {
            "address": address,
            "hostname": nodes[address].name if address in nodes else "",
            "roles": list(nodes[address].role) if address in nodes else [],
            "actions": [action_doc(a) for a in host_actions],
        }
        for address, host_actions in actions.items()
    ]


def changes_doc(config: ClusterConfig, result: UpResult) -> dict[str, Any]:
    """The `changed`, `hosts` and `cluster` members shared by the up and plan documents."""
    return {
        "changed": result.changed,
        "hosts": actions_doc(config, result.host_actions),
        "cluster": [action_doc(a) for a in result.cluster_actions],
    }


def print_actions(out: Console, result: UpResult, title: str) -> None:
    """One row an action; with more than LISTED rows, the same action on several hosts is one row that
    counts them (--output json names every host)."""
    rows: list[tuple[str, ...]] = []
    for address, host_actions in result.host_actions.items():
        files = [a for a in host_actions if a.kind == "write-file"]
        if files:  # certificates and configs: one row a host here, every path in --output json
            rows.append((address, "files", "write-file", f"{len(files)} files", _reasons(files)))
        rows += [
            (address, a.phase, a.kind, a.target, a.reason) for a in host_actions if a.kind != "write-file"
        ]
    rows += [(CLUSTER, c.phase, c.kind, c.target, c.reason) for c in result.cluster_actions]
    if len(rows) > LISTED:
        rows = _alike(rows)
    table = Table(title=title)
    for column in ("host", "phase", "action", "target", "why"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    out.print(table)


def _alike(rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Rows alike but for their host as one row that counts the hosts ("59 hosts"), and cluster rows alike
    but for the object's name as one that counts the objects ("node/… (300)"): a kubelet change on a
    large cluster cordons and uncordons every node, and a table of thousands of rows cost more CPU to
    draw than the run spent on the hosts."""
    hosts: dict[tuple[str, ...], list[str]] = {}
    objects: dict[tuple[str, ...], list[str]] = {}
    for host, phase, kind, target, why in rows:
        if host == CLUSTER and "/" in target:
            objects.setdefault((phase, kind, target.rpartition("/")[0], why), []).append(target)
        else:
            hosts.setdefault((phase, kind, target, why), []).append(host)
    alike = [(on[0] if len(on) == 1 else f"{len(on)} hosts", *action) for action, on in hosts.items()]
    return alike + [
        (CLUSTER, phase, kind, named[0] if len(named) == 1 else f"{group}/… ({len(named)})", why)
        for (phase, kind, group, why), named in objects.items()
    ]


def _reasons(actions: Sequence[Action]) -> str:
    counts: dict[str, int] = {}
    for a in actions:
        counts[a.reason] = counts.get(a.reason, 0) + 1
    return ", ".join(f"{n} {reason}" for reason, n in counts.items())


def print_report(out: Console, report: Report) -> None:
    """Every check of a small cluster; on a large one (more than LISTED checks) the failed checks, and
    the passed ones counted by kind: thousands of "ok" rows hide the one that failed (--output json has
    them all)."""
    table = Table(title="Verify")
    for column in ("check", "target", "result", "detail"):
        table.add_column(column)
    many = len(report.checks) > LISTED
    passed: dict[str, int] = {}
    for c in report.checks:
        if many and c.ok:
            passed[c.name] = passed.get(c.name, 0) + 1
        else:
            table.add_row(c.name, c.target, "ok" if c.ok else "FAIL", c.detail)
    for name, count in passed.items():
        table.add_row(name, f"{count} targets", "ok", "every one passed")
    out.print(table)
    if report.leases:
        leases = Table(title="Leader leases")
        for column in ("lease", "holder node", "holder identity", "renewed", "transitions"):
            leases.add_column(column)
        for x in report.leases:
            leases.add_row(
                x.name, x.holder_node or "-", x.holder, f"{x.age_seconds:.0f}s ago", str(x.transitions)
            )
        out.print(leases)
    out.print("cluster is healthy" if report.ok else f"{len(report.failures())} check(s) failed")
