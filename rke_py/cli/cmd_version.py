"""`rke-py version`: the rke-py release and the Kubernetes version it deploys by default."""

from __future__ import annotations

import json

import click

from rke_py import __version__
from rke_py.cli.options import output_option
from rke_py.config import kdm


@click.command("version")
@output_option
def command(output: str) -> None:
    """Print the rke-py version and the default Kubernetes version."""
    if output == "json":
        info = {
            "rke_py": __version__,
            "default_kubernetes_version": kdm.DEFAULT_K8S_VERSION,
            "kubernetes_versions": kdm.versions(),
        }
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"rke-py {__version__}")
    click.echo(f"default Kubernetes version: {kdm.DEFAULT_K8S_VERSION}")
