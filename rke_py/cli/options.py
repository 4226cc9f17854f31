"""Options shared by several commands, so they are spelled the same everywhere."""

from __future__ import annotations

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
