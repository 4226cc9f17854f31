"""`rke-py status`: the verify report of a running cluster, changing nothing."""

from __future__ import annotations

import click

from rke_py.cli.options import host_command_options
from rke_py.cli.output import console, emit_json
from rke_py.cli.render import print_report
from rke_py.cli.run import HostCommand
from rke_py.deploy.status import status
from rke_py.errors import UsageError
from rke_py.verify.checks import require_ok


@click.command("status")
@host_command_options
def command(host: HostCommand) -> None:
    """Check etcd, apiservers, every node's proxy, the leader leases and the nodes."""
    with host.run("status"):
        desired = host.prepare()
        if not desired.certificates_from_state:
            raise UsageError(f"no cluster state beside {host.config_path}: run `rke-py up` first")
        report = status(desired, host.options())
        if host.json:
            emit_json(report.to_dict())
        else:
            print_report(console(), report)
        require_ok(report)
