"""`rke-py plan`: what each node must run and hold. `--offline` builds it from cluster.yml and the state
file alone; nothing is contacted.

The rendering functions take a ClusterPlan, so the live plan (which also needs what the hosts run) can
print through them.
"""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from rke_py import config as cluster_config
from rke_py.cli.options import config_option, output_option, strict_option
from rke_py.cli.output import console, emit_json
from rke_py.config.schema import ClusterConfig
from rke_py.errors import UsageError
from rke_py.pki.bundle import Bundle, build_bundle
from rke_py.plan import build_plan
from rke_py.plan.model import ClusterPlan, ContainerSpec, FileSpec, NodePlan
from rke_py.state import read_state, state_path_for

SHORT = 12  # hash characters shown in the table
PLANES = ("etcd", "control", "worker")


@click.command("plan")
@config_option
@strict_option
@output_option
@click.option(
    "--offline", is_flag=True, help="Plan from cluster.yml and the state file only; contact no host."
)
def command(config_path: str, strict: bool, output: str, offline: bool) -> None:
    """Show the containers and files every node must have."""
    if not offline:
        raise UsageError(
            "live plan needs the hosts; use --offline to plan from cluster.yml and the state file"
        )
    loaded = cluster_config.load(config_path, strict=strict)
    for warning in loaded.warnings:
        click.echo(str(warning), err=True)
    bundle, source = certificates(loaded.config, config_path)
    if source == "generated":
        click.echo(
            f"no state file {state_path_for(config_path)}: certificates were generated in memory for this "
            "plan, so file and spec hashes will differ from those of `rke-py up`",
            err=True,
        )
    plan = build_plan(loaded.config, bundle)
    if output == "json":
        emit_json(plan_json(plan, source))
    else:
        print_plan(plan)


def certificates(config: ClusterConfig, config_path: str) -> tuple[Bundle, str]:
    """The state's certificates completed for `config` as `up` would, or a fresh bundle if there is none."""
    state = read_state(state_path_for(config_path))
    previous = (state.current.certificates or state.desired.certificates) if state else {}
    return build_bundle(config, previous), "state" if previous else "generated"


def plane_containers(node: NodePlan) -> list[tuple[str, ContainerSpec]]:
    """(plane, container) in start order."""
    return [(plane, spec) for plane in PLANES for spec in getattr(node, plane)]


def container_json(plane: str, spec: ContainerSpec) -> dict[str, Any]:
    health = spec.health
    return {
        "name": spec.name,
        "plane": plane,
        "image": spec.image,
        "entrypoint": list(spec.entrypoint),
        "command": list(spec.command),
        "env": list(spec.env),
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
        "containers": [container_json(plane, spec) for plane, spec in plane_containers(node)],
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
    for plane, spec in plane_containers(node):
        table.add_row(plane, spec.name, spec.spec_hash()[:SHORT], spec.image)
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
