"""`rke-py util get-state-file | get-kubeconfig`: the local files back, from the cluster or from the state."""

from __future__ import annotations

import click

from rke_py.cli.options import host_command_options
from rke_py.cli.output import console, emit_json
from rke_py.cli.run import HostCommand
from rke_py.deploy.saving import rebuild_kubeconfig
from rke_py.deploy.snapshot import get_state_file


@click.group("util")
def command() -> None:
    """Utilities (RKE's `rke util`)."""


@command.command("get-state-file")
@host_command_options
def get_state_file_command(host: HostCommand) -> None:
    """Write cluster.rkestate from the cluster's full-cluster-state secret (an existing file is kept with a
    time suffix)."""
    with host.run("util get-state-file"):
        path, who = get_state_file(host.prepare(local_state=False), host.options())
        if host.json:
            emit_json({"ok": True, "state": str(path), "read_with": who})
        else:
            console(summary=True).print(f"state written to {path} (read with {who})")


@command.command("get-kubeconfig")
@host_command_options
def get_kubeconfig_command(host: HostCommand) -> None:
    """Write kube_config_<name>.yml again from the state's certificates (an existing file is kept with a
    time suffix); touches no host."""
    with host.run("util get-kubeconfig"):
        path, kept = rebuild_kubeconfig(host.prepare())
        if host.json:
            emit_json({"ok": True, "kubeconfig": str(path), "previous": str(kept) if kept else None})
        else:
            moved = f" (the old one kept as {kept.name})" if kept else ""
            console(summary=True).print(f"kubeconfig written to {path}{moved}")
