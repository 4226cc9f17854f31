"""`rke-py validate`: load cluster.yml, print its problems, and say what it describes. Touches no host; the
state beside it is read for the images of a version rke-py does not list, as `up` takes them."""

from __future__ import annotations

import json

import click

from rke_py import config as cluster_config
from rke_py.cli.options import config_option, output_option, strict_option
from rke_py.config.schema import ROLES, ClusterConfig
from rke_py.errors import ConfigError, Problem
from rke_py.state import read_state, recorded_images, state_path_for


@click.command("validate")
@config_option
@strict_option
@output_option
def command(config_path: str, strict: bool, output: str) -> None:
    """Check cluster.yml without connecting anywhere; exit 2 if it is invalid."""
    state = read_state(state_path_for(config_path))
    recorded = recorded_images(state.current.rke_config) if state else None
    try:
        loaded = cluster_config.load(config_path, strict=strict, recorded=recorded)
    except ConfigError as exc:
        if output == "json":
            click.echo(_json(False, exc.problems, 0))
        raise
    if output == "json":
        click.echo(_json(True, loaded.warnings, len(loaded.config.nodes)))
        return
    for warning in loaded.warnings:
        click.echo(str(warning), err=True)
    click.echo(f"{config_path}: valid ({summary(loaded.config)})")


def summary(config: ClusterConfig) -> str:
    """e.g. "5 nodes: 3 etcd, 3 controlplane, 2 worker"."""
    count = len(config.nodes)
    roles = ", ".join(f"{len(config.hosts(role))} {role}" for role in ROLES)
    return f"{count} node{'' if count == 1 else 's'}: {roles}"


def _json(valid: bool, problems: list[Problem], nodes: int) -> str:
    return json.dumps({"valid": valid, "problems": [_problem(p) for p in problems], "nodes": nodes}, indent=2)


def _problem(problem: Problem) -> dict[str, object]:
    keys = ("file", "line", "col", "severity", "message", "hint")
    return {key: getattr(problem, key) for key in keys}
