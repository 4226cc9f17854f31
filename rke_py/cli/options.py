"""Options shared by several commands, so they are spelled the same everywhere."""

from __future__ import annotations

from pathlib import Path

import click

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


def host_command_options(fn):
    """The options every command that connects to the hosts takes."""
    for option in reversed(
        (
            config_option,
            strict_option,
            output_option,
            host_key_policy_option,
            known_hosts_option,
            concurrency_option,
            log_file_option,
            verbose_option,
        )
    ):
        fn = option(fn)
    return fn
