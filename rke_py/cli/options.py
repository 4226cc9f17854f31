"""Options shared by several commands, so they are spelled the same everywhere."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rke_py.cli.run import HostCommand
from rke_py.errors import UsageError
from rke_py.kube.api import API_PATIENCE

config_option = click.option(
    "--config",
    "config_path",
    default="cluster.yml",
    envvar="RKE_CONFIG",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="Cluster configuration file (RKE format).",
)
strict_option = click.option("--strict", is_flag=True, help="Treat warnings about cluster.yml as errors.")
output_option = click.option(
    "--output",
    "-o",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json for pipelines (one JSON document on stdout).",
)
host_key_policy_option = click.option(
    "--host-key-policy",
    type=click.Choice(["accept-new", "strict", "ignore"]),
    default="accept-new",
    show_default=True,
    envvar="RKE_PY_HOST_KEY_POLICY",
    help="SSH host keys: accept-new pins unknown keys in the state and refuses changed ones; "
    "strict refuses unknown keys; ignore checks nothing (not recommended).",
)
known_hosts_option = click.option(
    "--known-hosts",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="An OpenSSH known_hosts file whose keys are trusted besides those pinned in the state.",
)
concurrency_option = click.option(
    "--concurrency",
    type=click.IntRange(1, 500),
    default=50,
    show_default=True,
    help="Hosts worked on at once.",
)
log_file_option = click.option(
    "--log-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Debug log of the run [default: <config name>.rke-py.log beside cluster.yml].",
)
verbose_option = click.option("--verbose", "-v", is_flag=True, help="Show debug messages on stderr.")


cert_dir_option = click.option(
    "--cert-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory of custom certificates [default: <config name>_certs beside cluster.yml].",
)


def cert_dir_for(config_path: str, cert_dir: str | None) -> Path:
    """--cert-dir, or RKE's default: `<cluster file name>_certs` beside it (cluster_certs/)."""
    path = Path(config_path)
    return Path(cert_dir) if cert_dir else path.parent / f"{path.stem}_certs"


# RKE's commonFlags: on every RKE command that reaches hosts
ssh_agent_auth_option = click.option(
    "--ssh-agent-auth",
    is_flag=True,
    help="Authenticate with the SSH agent at SSH_AUTH_SOCK on every host (cluster.yml's ssh_agent_auth).",
)
ignore_docker_version_option = click.option(
    "--ignore-docker-version",
    is_flag=True,
    help="Do not refuse hosts whose Docker is older than rke-py supports (cluster.yml's key of that name).",
)
api_timeout_option = click.option(
    "--api-timeout",
    type=click.FloatRange(0),
    default=API_PATIENCE,
    show_default=True,
    envvar="RKE_PY_API_TIMEOUT",
    help="Seconds a Kubernetes API call is asked again, with backoff, while every apiserver is busy "
    "(no answer in time, 429, 503, an etcd timeout), a host's Docker call that can be repeated while "
    "Docker gives no answer within 50 s, and a status health check that gets no answer, before the run "
    "fails; raise it for slow hosts.",
)
HOST_OPTIONS = (
    config_option,
    strict_option,
    output_option,
    host_key_policy_option,
    known_hosts_option,
    concurrency_option,
    log_file_option,
    verbose_option,
    ssh_agent_auth_option,
    ignore_docker_version_option,
    api_timeout_option,
)


def host_command_options(fn: Callable[..., None]) -> Callable[..., None]:
    """The options every command that connects to the hosts takes, handed to it as one `host` argument."""

    @functools.wraps(fn)
    def command(**kwargs: Any) -> None:
        shared = {f.name: kwargs.pop(f.name) for f in dataclasses.fields(HostCommand)}
        fn(HostCommand(**shared), **kwargs)

    for option in reversed(HOST_OPTIONS):
        command = option(command)
    return command


# RKE's modes that deploy without SSH, and what rke-py offers instead
LOCAL_MODES = {
    "--local": "rke-py reaches every host over SSH, this machine too: list it in cluster.yml (address "
    "127.0.0.1 and an SSH user), or start a throw-away host with `rke-py lab up --nodes 1`",
    "--dind": "rke-py's docker-in-docker hosts are its lab: `rke-py lab up --nodes N` starts N hosts as "
    "containers and writes their cluster.yml; `rke-py lab down --name NAME` removes them",
}


def _refuse(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        flag = param.opts[0]
        raise UsageError(f"{flag} is not supported: {LOCAL_MODES[flag]}")


def refuse_local_modes(fn: Callable[..., None]) -> Callable[..., None]:
    """RKE's --local and --dind, accepted by the parser and refused in one line that says what to use."""
    for flag in reversed(LOCAL_MODES):
        fn = click.option(
            flag,
            is_flag=True,
            expose_value=False,
            callback=_refuse,
            help="RKE's; refused, naming what to use.",
        )(fn)
    return fn
