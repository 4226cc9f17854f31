"""The `rke-py` command line.

`main` maps errors to exit codes; each command module holds a click command that parses options, calls
one library function and prints. Commands are imported lazily so `--help` stays fast.
"""

from __future__ import annotations

import gc
import importlib
import signal
import sys
from typing import NoReturn

import click

from rke_py.cli.goflags import normalize
from rke_py.cli.output import Verbosity
from rke_py.errors import ExitStatus, RkePyError, Terminated

COMMANDS = {
    "validate": "rke_py.cli.cmd_validate",
    "plan": "rke_py.cli.cmd_plan",
    "up": "rke_py.cli.cmd_up",
    "status": "rke_py.cli.cmd_status",
    "remove": "rke_py.cli.cmd_remove",
    "etcd": "rke_py.cli.cmd_etcd",
    "cert": "rke_py.cli.cmd_cert",
    "encrypt": "rke_py.cli.cmd_encrypt",
    "util": "rke_py.cli.cmd_util",
    "config": "rke_py.cli.cmd_config",
    "lab": "rke_py.cli.cmd_lab",
    "version": "rke_py.cli.cmd_version",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        return importlib.import_module(module).command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(None, "--version", "-v", package_name="rke-py", prog_name="rke-py")
@click.option("--debug", "-d", is_flag=True, help="Debug messages on stderr.")
@click.option("--quiet", "-q", is_flag=True, help="Print only errors (and what a command was asked to show).")
@click.option("--trace", is_flag=True, help="As --debug, with the SSH library's messages.")
@click.pass_context
def cli(ctx: click.Context, debug: bool, quiet: bool, trace: bool) -> None:
    """Stand up Kubernetes the RKE way from an RKE-style cluster.yml."""
    ctx.obj = Verbosity(debug=debug, quiet=quiet, trace=trace)


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def _interruption(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM behind `exc`: itself, what it was raised from, or what it was raised while
    handling (a signal lands anywhere, even inside a lock's release)."""
    while exc is not None and not isinstance(exc, KeyboardInterrupt):
        exc = exc.__cause__ or exc.__context__
    return exc


def _stopped(interruption: KeyboardInterrupt) -> NoReturn:
    again = "; run the command again to finish what it began"
    if isinstance(interruption, Terminated):
        click.echo(f"terminated (SIGTERM){again}", err=True)
        sys.exit(ExitStatus.TERMINATED)
    click.echo(f"interrupted{again}", err=True)
    sys.exit(ExitStatus.INTERRUPTED)


# A run holds one plan and every host's facts for its whole life and makes few reference cycles: collecting
# after every 700 allocations walked them again and again (a quarter of a no-op's CPU at 3,000 nodes).
GC_THRESHOLDS = (100_000, 50, 50)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and exit with a documented ExitStatus."""
    gc.set_threshold(*GC_THRESHOLDS)
    args = normalize(sys.argv[1:] if argv is None else argv, cli)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        status = cli.main(args=args, prog_name="rke-py", standalone_mode=False)
    except RkePyError as exc:
        if (interruption := _interruption(exc)) is not None:  # a step cut short by the signal
            _stopped(interruption)
        click.echo(f"error: {exc}" if not getattr(exc, "problems", None) else str(exc), err=True)
        sys.exit(exc.exit_status)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:  # click turns Ctrl-C into Abort
        if isinstance(exc.__cause__, EOFError):  # and any EOFError, which is a bug, not a Ctrl-C
            raise exc.__cause__ from None
        _stopped(_interruption(exc) or KeyboardInterrupt())
    except click.ClickException as exc:
        exc.show()
        sys.exit(ExitStatus.CONFIG)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        if (interruption := _interruption(exc)) is None:
            raise
        _stopped(interruption)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
    sys.exit(status if isinstance(status, int) else ExitStatus.OK)
