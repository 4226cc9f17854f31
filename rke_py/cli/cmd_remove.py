"""`rke-py remove`: take away every container and file rke-py put on the hosts."""

from __future__ import annotations

import sys

import click

from rke_py.cli.options import host_command_options, refuse_local_modes
from rke_py.cli.output import console, emit_json, phase_progress
from rke_py.cli.run import HostCommand
from rke_py.deploy.remove import remove
from rke_py.errors import AbortedError, UsageError


@click.command("remove")
@host_command_options
@click.option("--force", is_flag=True, help="Do not ask for confirmation.")
@refuse_local_modes
def command(host: HostCommand, force: bool) -> None:
    """Remove the Kubernetes cluster from its hosts, and its local state and kubeconfig."""
    with host.run("remove"):
        desired = host.prepare()
        if not force:
            if not sys.stdin.isatty():
                raise UsageError("remove needs confirmation and stdin is not a terminal: pass --force")
            if not click.confirm(
                f"Remove the Kubernetes cluster of {host.config_path} from {len(desired.config.nodes)} hosts?"
            ):
                raise AbortedError("nothing removed")
        with phase_progress() as on_phase:
            removed = remove(desired, host.options(verify=False), on_phase)
        if host.json:
            emit_json({"ok": True, "hosts": [{"address": a, "removed": r} for a, r in removed.items()]})
        else:
            out = console(summary=True)
            for address, names in removed.items():
                out.print(f"{address}: removed {', '.join(names) or 'nothing'}")
            out.print("state and kubeconfig deleted")
