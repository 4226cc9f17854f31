"""What every host command does around its work: its shared options, the lock, the log file, and the log
path on failure."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from rke_py.cli.output import default_log_file, setup_logging
from rke_py.deploy.desired import Desired, prepare
from rke_py.deploy.session import Options
from rke_py.errors import RkePyError
from rke_py.lock import cluster_lock

log = logging.getLogger("rke_py")


@dataclass(frozen=True)
class HostCommand:
    """The options every command that connects to the hosts takes (`options.host_command_options`)."""

    config_path: str
    strict: bool
    output: str
    host_key_policy: str
    known_hosts: str | None
    concurrency: int
    log_file: str | None
    verbose: bool
    ssh_agent_auth: bool
    ignore_docker_version: bool
    api_timeout: float

    @property
    def json(self) -> bool:
        return self.output == "json"

    def options(self, *, verify: bool = True, **more: Any) -> Options:
        """The run's options; `more`: those only some commands have (RKE's --update-only, ...)."""
        return Options(
            host_key_policy=self.host_key_policy,
            known_hosts=self.known_hosts,
            concurrency=self.concurrency,
            verify=verify,
            ssh_agent_auth=self.ssh_agent_auth,
            ignore_docker_version=self.ignore_docker_version,
            api_timeout=self.api_timeout,
            **more,
        )

    def prepare(self, **kwargs: Any) -> Desired:
        return prepare(self.config_path, strict=self.strict, **kwargs)

    @contextlib.contextmanager
    def run(self, command: str) -> Iterator[None]:
        """Log to the file (and stderr), hold the cluster's lock, and name the log file on failure."""
        path = Path(self.config_path)
        log_path = Path(self.log_file) if self.log_file else default_log_file(path)
        setup_logging(log_path, verbose=self.verbose)
        log.debug("rke-py %s --config %s", command, path)
        try:
            with cluster_lock(path):
                yield
        except RkePyError as exc:
            # stderr shows it via main; the log file keeps it too
            log.debug("failed (exit %d): %s", exc.exit_status, exc)
            click.echo(f"log file: {log_path}", err=True)
            raise
