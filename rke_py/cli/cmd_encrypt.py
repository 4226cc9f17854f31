"""`rke-py encrypt rotate-key`: a new secrets encryption key, as `rke encrypt rotate-key`."""

from __future__ import annotations

import click

from rke_py.cli.cmd_up import bring_up
from rke_py.cli.options import host_command_options
from rke_py.cli.run import cluster_run, options_from
from rke_py.deploy.desired import prepare


@click.group("encrypt")
def command() -> None:
    """Secrets encryption at rest."""


@command.command("rotate-key")
@host_command_options
def rotate_key(
    config_path, strict, output, host_key_policy, known_hosts, concurrency, log_file, verbose
) -> None:
    """A new aescbc key: added first, every Secret written anew with it, then the old key dropped."""
    with cluster_run("encrypt rotate-key", config_path, log_file, verbose):
        desired = prepare(config_path, strict=strict, rotate_key=True)
        bring_up(desired, output, options_from(host_key_policy, known_hosts, concurrency))
