"""How commands talk to people and pipelines: progress on stderr, results on stdout, a log file always.

On a terminal progress is drawn with rich; otherwise it is plain timestamped lines, so CI logs read well.
With `--output json` stdout carries exactly one JSON document.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.logging import RichHandler

from rke_py.deploy.phases import Phase
from rke_py.files import open_private

LOGGER = "rke_py"
STDERR = Console(stderr=True)  # shared by log lines and the spinner so rich keeps them apart


class _PrivateLog(logging.FileHandler):
    """The log file, 0600 and never opened through a link: it names the hosts and steps of a build."""

    def _open(self) -> io.TextIOWrapper:
        return os.fdopen(open_private(self.baseFilename, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8")


@dataclass(frozen=True)
class Verbosity:
    """RKE's global flags: --debug, --quiet (errors only), --trace (also the SSH library's messages)."""

    debug: bool = False
    quiet: bool = False
    trace: bool = False


def verbosity() -> Verbosity:
    """The global flags of the command line being run (set on the root context by `rke_py.cli`)."""
    ctx = click.get_current_context(silent=True)
    found = ctx.find_root().obj if ctx is not None else None
    return found if isinstance(found, Verbosity) else Verbosity()


def _not_a_refused_forward(record: logging.LogRecord) -> bool:
    """paramiko logs each refused port forward at ERROR: every probe of a component not listening yet is
    one, and the probe's own answer says so. Other refusals (forwarding prohibited) stay in the log."""
    return not (
        record.name == "paramiko.transport" and "open FAILED: Connection refused" in record.getMessage()
    )


def setup_logging(log_file: Path | None, *, verbose: bool = False) -> None:
    """Progress to stderr (INFO; DEBUG with --verbose or --debug; ERROR only with --quiet), everything to
    the log file (DEBUG)."""
    level = verbosity()
    quiet = logging.getLogger("paramiko")  # its probes log at ERROR; rke-py reports failures itself
    for old in quiet.handlers:
        old.close()
    quiet.handlers = [logging.NullHandler()]
    quiet.propagate = False
    root = logging.getLogger(LOGGER)
    root.setLevel(logging.DEBUG)
    for old in root.handlers:
        old.close()
    root.handlers.clear()
    if sys.stderr.isatty():
        handler: logging.Handler = RichHandler(console=STDERR, show_path=False, markup=False)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%dT%H:%M:%S"))
    loud = verbose or level.debug or level.trace
    handler.setLevel(logging.ERROR if level.quiet else logging.DEBUG if loud else logging.INFO)
    root.addHandler(handler)
    if level.trace and not level.quiet:
        quiet.addHandler(handler)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        file_handler = _PrivateLog(log_file)
        file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        file_handler.setLevel(logging.DEBUG)
        file_handler.addFilter(_not_a_refused_forward)
        root.addHandler(file_handler)
        # why an SSH connection dropped (a reset, a failed rekey) is paramiko's to say: in the file only
        quiet.addHandler(file_handler)


def default_log_file(config_path: Path) -> Path:
    """Beside the state file: <dir>/<name>.rke-py.log (appended to, one block per run)."""
    return config_path.parent / f"{config_path.stem}.rke-py.log"


def emit_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=False, default=str))


def console(*, summary: bool = False) -> Console:
    """Tables for stdout; wide when piped so CI logs keep whole lines instead of wrapped cells. A `summary`
    of what a command changed is left out with --quiet; what a command was asked to show never is."""
    quiet = summary and verbosity().quiet
    return Console(quiet=quiet) if sys.stdout.isatty() else Console(width=200, quiet=quiet)


def print_warnings(warnings) -> None:
    if verbosity().quiet:
        return
    for warning in warnings:
        click.echo(str(warning), err=True)


@contextlib.contextmanager
def phase_progress() -> Iterator[Callable[[Phase], None]]:
    """A spinner naming the current phase on a terminal; a plain log line per phase otherwise."""
    if not sys.stderr.isatty() or verbosity().quiet:
        yield lambda phase: logging.getLogger(LOGGER).info("phase: %s", phase.title)
        return
    with STDERR.status("starting") as status:
        yield lambda phase: status.update(phase.title + " ...")
