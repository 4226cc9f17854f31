"""`rke-py plan`: the actions `up` would take on each host now, from the same diff, changing nothing.

`--offline` shows instead what each node must run and hold, built from cluster.yml and the state file
alone; nothing is contacted.
"""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from rke_py.cli.options import host_command_options
from rke_py.cli.output import console, emit_json, print_warnings
from rke_py.cli.render import changes_doc, print_actions
from rke_py.cli.run import HostCommand
from rke_py.deploy.up import plan
from rke_py.plan.model import ClusterPlan, ContainerSpec, FileSpec, NodePlan
from rke_py.state import state_path_for

SHORT = 12  # hash characters shown in the table


@click.command("plan")
@host_command_options
@click.option(
    "--offline", is_flag=True, help="Plan from cluster.yml and the state file only; contact no host."
)
def command(host: HostCommand, offline: bool) -> None:
    """Show what `up` would change on each host now (or, with --offline, what each node must have)."""
    if offline:
        desired = host.prepare()
        print_warnings(desired.warnings)
        if not desired.certificates_from_state:
            click.echo(
                f"no state file {state_path_for(host.config_path)}: certificates were generated in memory "
                "for this plan, so file and spec hashes will differ from those of `rke-py up`",
                err=True,
            )
        source = "state" if desired.certificates_from_state else "generated"
        if host.json:
            emit_json(plan_json(desired.plan, source))
        else:
            print_plan(desired.plan)
        return
    with host.run("plan"):
        desired = host.prepare(changing=True)
        print_warnings(desired.warnings)
        result = plan(desired, host.options(verify=False))
        if host.json:
            doc = changes_doc(desired.config, result)
            emit_json({"changes": doc.pop("changed"), **doc})
        elif result.changed:
            print_actions(console(), result, title="Changes `rke-py up` would make")
        else:
            console().print("Nothing to change: every host already matches cluster.yml.")


def container_json(plane: str, spec: ContainerSpec) -> dict[str, Any]:
    health = spec.health
    return {
        "name": spec.name,
        "plane": plane,
        "image": spec.image,
        "entrypoint": list(spec.entrypoint),
        "command": list(spec.command),
        "env": spec.shown_env(),
        "binds": list(spec.binds),
        "network_mode": spec.network_mode,
        "pid_mode": spec.pid_mode,
        "privileged": spec.privileged,
        "restart_policy": spec.restart_policy,
        "volumes_from": list(spec.volumes_from),
        "user": spec.user,
        "start": spec.start,
        "files": list(spec.files),
        "health": None if health is None else {"url": health.url, "client_cert": health.client_cert},
        "spec_hash": spec.spec_hash(),
    }


def file_json(spec: FileSpec) -> dict[str, Any]:
    """Path, mode and content hash; never the content."""
    return {"path": spec.path, "mode": f"{spec.mode:04o}", "sha256": spec.sha256}


def node_json(node: NodePlan) -> dict[str, Any]:
    return {
        "address": node.address,
        "hostname": node.hostname,
        "roles": list(node.roles),
        "containers": [container_json(p.plane, p.spec) for p in node.placed],
        "files": [file_json(f) for f in node.files],
    }


def plan_json(plan: ClusterPlan, certificates: str) -> dict[str, Any]:
    """The documented `--output json` document (docs/output.md, "plan")."""
    return {"certificates": certificates, "nodes": [node_json(n) for n in plan.nodes]}


def containers_table(node: NodePlan) -> Table:
    table = Table(title="containers", title_justify="left", box=None, pad_edge=False)
    table.add_column("plane")
    table.add_column("name", no_wrap=True)
    table.add_column("spec hash", no_wrap=True)
    table.add_column("image", overflow="fold")
    for placed in node.placed:
        spec = placed.spec
        table.add_row(placed.plane, spec.name, spec.spec_hash()[:SHORT], spec.image)
    return table


def files_table(node: NodePlan) -> Table:
    table = Table(title="files", title_justify="left", box=None, pad_edge=False)
    table.add_column("path", overflow="fold")
    table.add_column("mode")
    table.add_column("sha256", no_wrap=True)
    for spec in node.files:
        table.add_row(spec.path, f"{spec.mode:04o}", spec.sha256[:SHORT])
    return table


def print_plan(plan: ClusterPlan) -> None:
    out = console()
    for node in plan.nodes:
        out.rule(f"{node.address} ({node.hostname}: {', '.join(node.roles)})", align="left")
        out.print(containers_table(node))
        out.print(files_table(node))
        out.print()
