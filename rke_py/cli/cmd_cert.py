"""`rke-py cert rotate | list | generate-csr`: RKE's certificate rotation, when each certificate expires, and
requests for certificates your own CA signs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click
from rich.table import Table

from rke_py.cli.cmd_up import bring_up
from rke_py.cli.options import cert_dir_for, cert_dir_option, config_option, host_command_options
from rke_py.cli.output import console, emit_json
from rke_py.cli.run import HostCommand
from rke_py.config import load
from rke_py.deploy.desired import Rotation
from rke_py.deploy.status import certificates
from rke_py.errors import UsageError
from rke_py.pki.bundle import SERVICES
from rke_py.pki.custom import generate_csrs
from rke_py.pki.expiry import WARN_DAYS


@click.group("cert")
def command() -> None:
    """Rotate the cluster's certificates, or list them with their expiry."""


@command.command("rotate")
@host_command_options
@click.option(
    "--service",
    "services",
    multiple=True,
    type=click.Choice(list(SERVICES)),
    help="Rotate only this service's certificates (repeatable) [default: every certificate].",
)
@click.option("--rotate-ca", is_flag=True, help="A new CA too, and every certificate signed again by it.")
def rotate(host: HostCommand, services: tuple[str, ...], rotate_ca: bool) -> None:
    """New keys and certificates, deployed and restarted by the rolling rules (as `rke cert rotate`)."""
    with host.run("cert rotate"):
        desired = host.prepare(rotation=Rotation(services, rotate_ca))
        bring_up(desired, host.output, host.options())


@command.command("list")
@host_command_options
def list_(host: HostCommand) -> None:
    """Every certificate of the state, and what each kubelet serves: subject, names, expiry."""
    with host.run("cert list"):
        desired = host.prepare()
        if not desired.certificates_from_state:
            raise UsageError(f"no cluster state beside {host.config_path}: run `rke-py up` first")
        found = certificates(desired, host.options())
        now = dt.datetime.now(dt.UTC)
        if host.json:
            emit_json({"certificates": [e.to_dict(now) for e in found]})
            return
        table = Table(title="Certificates")
        for column in ("name", "where", "subject", "names", "not after", "days left"):
            table.add_column(column)
        for e in found:
            days = e.days_left(now)
            left = f"[red]{days}[/red]" if days < WARN_DAYS else str(days)
            table.add_row(e.name, e.where, e.subject, ", ".join(e.sans), f"{e.not_after:%Y-%m-%d}", left)
        console().print(table)


@command.command("generate-csr")
@config_option
@cert_dir_option
def generate_csr(config_path, cert_dir) -> None:
    """A key and a certificate request for every certificate the cluster needs, to have them signed by
    your CA for `up --custom-certs` (existing keys are kept)."""
    config = load(Path(config_path)).config
    directory = cert_dir_for(config_path, cert_dir)
    for path in generate_csrs(directory, config):
        click.echo(path)
