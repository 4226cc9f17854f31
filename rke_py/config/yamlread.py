"""Parse YAML text into plain data plus the 1-based position of every mapping key and sequence item.

ruamel.yaml's round-trip loader keeps line/column on each node; we copy them into a flat dict keyed by path
so the rest of the config package works on plain dicts and lists and can still cite file:line.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.scalarbool import ScalarBoolean

from rke_py.config.findings import Path
from rke_py.errors import Problem

Positions = dict[Path, tuple[int, int]]


class YamlSyntaxError(Exception):
    """The text is not YAML; carries the one problem the parser can report."""

    def __init__(self, problem: Problem):
        self.problem = problem
        super().__init__(str(problem))


def parse(text: str, source: str) -> tuple[Any, Positions]:
    """Return (plain data, positions). The root is at path () and position (1, 1)."""
    try:
        tree = YAML(typ="rt").load(text)
    except MarkedYAMLError as exc:
        raise YamlSyntaxError(_syntax_problem(exc, source)) from exc
    except YAMLError as exc:
        raise YamlSyntaxError(Problem(source, 0, 0, f"YAML syntax error: {exc}")) from exc
    positions: Positions = {(): (1, 1)}
    return _plain(tree, (), positions), positions


def _syntax_problem(exc: MarkedYAMLError, source: str) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
    what = exc.problem or exc.context or "not valid YAML"
    if exc.context and exc.problem:
        what = f"{exc.context}{', ' if exc.problem.startswith('but') else ': '}{exc.problem}"
    if _started_elsewhere(exc, mark):
        what += f" (it starts on line {exc.context_mark.line + 1})"
    return Problem(source, line, col, f"YAML syntax error: {_one_line(what)}", _syntax_hint(what))


def _started_elsewhere(exc: MarkedYAMLError, mark: Any) -> bool:
    """True when the parser was inside a construct ("while parsing a flow mapping") begun on another line."""
    context = exc.context or ""
    return bool(
        mark
        and exc.context_mark
        and context.startswith(("while parsing", "while scanning"))
        and exc.context_mark.line != mark.line
    )


def _syntax_hint(what: str) -> str:
    if "duplicate key" in what:
        return "a key may appear only once in a mapping; remove or merge the repeated one"
    if "single document" in what:
        return 'cluster.yml holds one YAML document; remove the "---" line and what follows'
    if "\\t" in what or "tab" in what:
        return "YAML indentation must use spaces, not tabs"
    return "check the indentation, colons and quoting on this line and the one before"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _plain(node: Any, path: Path, positions: Positions) -> Any:
    if isinstance(node, dict):
        return _plain_map(node, path, positions)
    if isinstance(node, list):
        return _plain_seq(node, path, positions)
    return _plain_scalar(node)


def _plain_map(node: Any, path: Path, positions: Positions) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        name = str(key)
        child = (*path, name)
        if key in node.lc.data:  # keys merged in with "<<: *anchor" have no position of their own
            positions[child] = _at(node.lc.key(key))
        out[name] = _plain(value, child, positions)
    return out


def _plain_seq(node: Any, path: Path, positions: Positions) -> list[Any]:
    out: list[Any] = []
    for index, value in enumerate(node):
        child = (*path, index)
        positions[child] = _at(node.lc.item(index))
        out.append(_plain(value, child, positions))
    return out


def _plain_scalar(node: Any) -> Any:
    """ruamel's scalar subclasses (ScalarFloat, LiteralScalarString, ...) as the builtin types."""
    if isinstance(node, ScalarBoolean):
        return bool(node)
    for kind in (bool, int, float, str):
        if isinstance(node, kind):
            return kind(node)
    return node


def _at(line_col: tuple[int, int] | None) -> tuple[int, int]:
    line, col = line_col or (0, 0)
    return (line + 1, col + 1)
