"""`rke-py remove`: take away every container and file rke-py put on the hosts."""

from __future__ import annotations

import sys

import click

from rke_py.cli.options import host_command_options
from rke_py.cli.output import console, emit_json
from rke_py.cli.run import cluster_run, options_from
from rke_py.deploy.desired import prepare
from rke_py.deploy.remove import remove
from rke_py.errors import AbortedError, UsageError


@click.command("remove")
@host_command_options
@click.option("--force", is_flag=True, help="Do not ask for confirmation.")
def command(
    config_path, strict, output, host_key_policy, known_hosts, concurrency, log_file, verbose, force
) -> None:
    """Remove the Kubernetes cluster from its hosts, and its local state and kubeconfig."""
    with cluster_run("remove", config_path, log_file, verbose):
        desired = prepare(config_path, strict=strict)
        if not force:
            if not sys.stdin.isatty():
                raise UsageError("remove needs confirmation and stdin is not a terminal: pass --force")
            if not click.confirm(
                f"Remove the Kubernetes cluster of {config_path} from {len(desired.config.nodes)} hosts?"
            ):
                raise AbortedError("nothing removed")
        removed = remove(desired, options_from(host_key_policy, known_hosts, concurrency, verify=False))
        if output == "json":
            emit_json({"ok": True, "hosts": [{"address": a, "removed": r} for a, r in removed.items()]})
        else:
            out = console()
            for address, names in removed.items():
                out.print(f"{address}: removed {', '.join(names) or 'nothing'}")
            out.print("state and kubeconfig deleted")
