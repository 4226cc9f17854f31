"""What every host command does around its work: lock, log file, and the log path on failure."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import click

from rke_py.cli.output import default_log_file, setup_logging
from rke_py.deploy.session import Options
from rke_py.errors import RkePyError
from rke_py.lock import cluster_lock

log = logging.getLogger("rke_py")


@contextlib.contextmanager
def cluster_run(command: str, config_path: str, log_file: str | None, verbose: bool) -> Iterator[None]:
    path = Path(config_path)
    log_path = Path(log_file) if log_file else default_log_file(path)
    setup_logging(log_path, verbose=verbose)
    log.debug("rke-py %s --config %s", command, path)
    try:
        with cluster_lock(path):
            yield
    except RkePyError as exc:
        log.debug("failed (exit %d): %s", exc.exit_status, exc)  # stderr shows it via main; keep it here too
        click.echo(f"log file: {log_path}", err=True)
        raise


def options_from(
    host_key_policy: str, known_hosts: str | None, concurrency: int, verify: bool = True
) -> Options:
    return Options(host_key_policy, known_hosts, concurrency, verify)
