"""Exit codes and the exceptions that map onto them.

Library code raises these; only `rke_py.cli.main` turns them into an exit code, so every
command reports failures the same way and pipelines can branch on the number.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitStatus(IntEnum):
    """The process exit codes rke-py documents (README, "Exit codes")."""

    OK = 0
    ERROR = 1  # unexpected failure; a bug or an environment problem rke-py did not foresee
    CONFIG = 2  # cluster.yml, a command-line option or the state file is unusable; nothing was touched
    CONNECT = 3  # a host could not be reached or authenticated over SSH, or its Docker did not answer
    PREFLIGHT = 4  # a host failed preflight checks; nothing was changed anywhere
    APPLY = 5  # changing a host failed (a container did not start or become healthy)
    VERIFY = 6  # the cluster was built but verification failed (etcd, apiserver, proxy, leases, nodes)
    LOCKED = 7  # another rke-py run holds the lock for this cluster
    ABORTED = 8  # the user declined a confirmation
    SKIPPED = 9  # the cluster was built, but unreachable workers (within max_unavailable_worker) were skipped
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
    TERMINATED = 143  # SIGTERM (128 + 15): a cancelled CI job, `kill`


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: the run stops as Ctrl-C stops it, so a cancelled pipeline job
    leaves hosts between two actions, the same as an interrupted one."""


class RkePyError(Exception):
    """Base class: a failure rke-py understands and can explain to the user."""

    exit_status = ExitStatus.ERROR


def printable(text: str) -> str:
    """`text` with every control or invisible character escaped (\\n, \\x1b, \\u2028), so a value from a file
    can neither break a message across lines nor send escape sequences to a terminal."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def _escape(char: str) -> str:
    return repr(char)[1:-1] if ord(char) < 0x80 else f"\\u{ord(char):04x}"


@dataclass(frozen=True)
class Problem:
    """One finding about cluster.yml, positioned so an editor can jump to it."""

    file: str
    line: int  # 1-based; 0 when the problem has no position (e.g. an empty file)
    col: int  # 1-based
    message: str  # what is wrong
    hint: str = ""  # how to fix it
    severity: str = "error"  # "error" or "warning"

    def __str__(self) -> str:
        """One line of printable text, whatever the file put into the values it quotes."""
        where = printable(f"{self.file}:{self.line}:{self.col}" if self.line else self.file)
        text = f"{where}: {printable(self.message)}"
        if self.hint:
            text += f" — {printable(self.hint)}"
        if self.severity == "warning":
            text = f"{where}: warning: {text[len(where) + 2 :]}"
        return text


class ConfigError(RkePyError):
    """cluster.yml is invalid; carries every problem found, not just the first."""

    exit_status = ExitStatus.CONFIG

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class UsageError(RkePyError):
    """A command-line option is missing or wrong (e.g. a prompt is needed but stdin is not a terminal)."""

    exit_status = ExitStatus.CONFIG


class HostError(RkePyError):
    """Something failed on one host; names the host and the step. A step that changes or reads the host
    failed: exit 5 unless a subclass says otherwise."""

    exit_status = ExitStatus.APPLY

    def __init__(self, host: str, step: str, message: str, log_tail: list[str] | None = None):
        self.host = host
        self.step = step
        self.detail = message
        self.log_tail = log_tail or []
        text = printable(f"{host}: {step}: {message}")
        if self.log_tail:
            text += "\n  last log lines:\n" + "\n".join(f"    {printable(line)}" for line in self.log_tail)
        super().__init__(text)


class ConnectError(HostError):
    """SSH or Docker could not be reached on a host (refused, timed out, auth, host key)."""

    exit_status = ExitStatus.CONNECT


class UnreachableError(ConnectError):
    """Nothing answered: the host is down or cut off. Only this may be skipped (max_unavailable_worker); a
    refused key or an unknown host key always stops the run."""


class BusyError(ConnectError):
    """A server on the host took the connection and gave no answer in time: busy (a slow host's apiserver
    stalls for seconds), not gone; worth asking again, unlike a refusal."""


class PreflightError(RkePyError):
    """One or more hosts failed preflight; carries every host's failure."""

    exit_status = ExitStatus.PREFLIGHT

    def __init__(self, failures: list[HostError], advice: str = ""):
        self.failures = failures
        lines = [
            "preflight failed, nothing was changed:",
            *(str(f) for f in failures),
            *([advice] if advice else []),
        ]
        super().__init__("\n".join(lines))


class ApplyError(HostError):
    """Applying a change on a host failed."""


class VerifyError(RkePyError):
    """Verification found the cluster unhealthy."""

    exit_status = ExitStatus.VERIFY


class SkippedHostsError(RkePyError):
    """`up` finished without the worker hosts it could not reach (within max_unavailable_worker)."""

    exit_status = ExitStatus.SKIPPED


class LockedError(RkePyError):
    exit_status = ExitStatus.LOCKED


class AbortedError(RkePyError):
    exit_status = ExitStatus.ABORTED
