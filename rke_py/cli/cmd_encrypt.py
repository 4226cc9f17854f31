"""`rke-py encrypt rotate-key`: a new secrets encryption key, as `rke encrypt rotate-key`."""

from __future__ import annotations

import click

from rke_py.cli.cmd_up import bring_up
from rke_py.cli.options import host_command_options
from rke_py.cli.run import HostCommand


@click.group("encrypt")
def command() -> None:
    """Secrets encryption at rest."""


@command.command("rotate-key")
@host_command_options
def rotate_key(host: HostCommand) -> None:
    """A new aescbc key: added first, every Secret written anew with it, then the old key dropped."""
    with host.run("encrypt rotate-key"):
        bring_up(host.prepare(rotate_key=True), host.output, host.options())
