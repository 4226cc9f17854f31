"""`rke-py version`: the rke-py release and the Kubernetes version it deploys by default; with a cluster
state beside --config, also the version the cluster's apiservers report, as `rke version` shows."""

from __future__ import annotations

import click

from rke_py import __version__
from rke_py.cli.options import config_option, output_option
from rke_py.cli.output import emit_json
from rke_py.config import kdm
from rke_py.deploy.desired import prepare
from rke_py.deploy.session import Options
from rke_py.deploy.status import server_version
from rke_py.state import state_path_for


@click.command("version")
@config_option
@output_option
def command(config_path: str, output: str) -> None:
    """Print the rke-py version, the default Kubernetes version and, when cluster.yml has a state beside
    it, the cluster's Kubernetes version."""
    cluster = None
    if state_path_for(config_path).exists():
        desired = prepare(config_path)
        if desired.state.current.rke_config:
            cluster = server_version(desired, Options())
    if output == "json":
        info = {
            "rke_py": __version__,
            "default_kubernetes_version": kdm.DEFAULT_K8S_VERSION,
            "kubernetes_versions": kdm.versions(),
            "cluster_kubernetes_version": cluster,
        }
        emit_json(info)
        return
    click.echo(f"rke-py {__version__}")
    click.echo(f"default Kubernetes version: {kdm.DEFAULT_K8S_VERSION}")
    if cluster:
        click.echo(f"Server Version: {cluster}")
