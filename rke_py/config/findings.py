"""Collects problems while cluster.yml is read, so one run reports all of them, each at its file:line.

Paths are tuples of YAML keys and list indexes, e.g. ("nodes", 0, "address"). A problem is placed at the
nearest path the file actually contains, so "nodes[0] has no user" points at the node itself.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from rke_py.errors import Problem

Path = tuple[Any, ...]


def dotted(path: Path) -> str:
    """("services", "kube-api", "extra_args") -> "services.kube-api.extra_args"; indexes as [0]."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def excerpt(value: object, limit: int = 60) -> str:
    """`value` as text for a message, cut short when it is long (a 5,000-digit number helps nobody)."""
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def did_you_mean(word: str, choices: tuple[str, ...]) -> str:
    """' (did you mean "x"?)' for the closest choice, or "" when none is close."""
    close = difflib.get_close_matches(word, choices, n=1)
    return f' (did you mean "{close[0]}"?)' if close else ""


class Findings:
    """Errors and warnings about one file; nothing more is said at or below a value of the wrong type."""

    def __init__(self, source: str, positions: dict[Path, tuple[int, int]]):
        self.source = source
        self.positions = positions
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []
        self._failed: set[Path] = set()

    def where(self, path: Path) -> tuple[int, int]:
        """Line and column of `path`, or of its nearest ancestor the file contains."""
        for end in range(len(path), -1, -1):
            if path[:end] in self.positions:
                return self.positions[path[:end]]
        return (0, 0)

    def failed(self, path: Path) -> bool:
        """True when `path` or an ancestor had a type error (so checks below it would only add noise)."""
        return any(path[:end] in self._failed for end in range(len(path) + 1))

    def type_error(self, path: Path, message: str, hint: str = "") -> None:
        """A value of the wrong type: reported once, and later checks at or below `path` stay quiet."""
        self.error(path, message, hint)
        self._failed.add(path)

    def error(self, path: Path, message: str, hint: str = "") -> None:
        if not self.failed(path):
            self.errors.append(self._problem(path, message, hint, "error"))

    def warning(self, path: Path, message: str, hint: str = "") -> None:
        self.warnings.append(self._problem(path, message, hint, "warning"))

    def _problem(self, path: Path, message: str, hint: str, severity: str) -> Problem:
        line, col = self.where(path)
        return Problem(self.source, line, col, message, hint, severity)

    def result(self, strict: bool) -> tuple[list[Problem], list[Problem]]:
        """(errors, warnings), each sorted by position; with `strict`, warnings count as errors."""
        warnings = _by_position(self.warnings)
        if strict:
            promoted = [_as_error(w) for w in warnings]
            return _by_position([*self.errors, *promoted]), []
        return _by_position(self.errors), warnings


def _by_position(problems: Iterable[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.line, p.col))


def _as_error(problem: Problem) -> Problem:
    return Problem(problem.file, problem.line, problem.col, problem.message, problem.hint, "error")
