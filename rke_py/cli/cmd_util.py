"""`rke-py util get-state-file`: cluster.rkestate back from the running cluster."""

from __future__ import annotations

import click

from rke_py.cli.options import host_command_options
from rke_py.cli.output import console, emit_json
from rke_py.cli.run import cluster_run, options_from
from rke_py.deploy.desired import prepare
from rke_py.deploy.snapshot import get_state_file


@click.group("util")
def command() -> None:
    """Utilities (RKE's `rke util`)."""


@command.command("get-state-file")
@host_command_options
def get_state_file_command(
    config_path, strict, output, host_key_policy, known_hosts, concurrency, log_file, verbose
) -> None:
    """Write cluster.rkestate from the cluster's full-cluster-state secret (an existing file is kept with a
    time suffix)."""
    with cluster_run("util get-state-file", config_path, log_file, verbose):
        desired = prepare(config_path, strict=strict)
        path, who = get_state_file(desired, options_from(host_key_policy, known_hosts, concurrency))
        if output == "json":
            emit_json({"ok": True, "state": str(path), "read_with": who})
        else:
            console().print(f"state written to {path} (read with {who})")
