"""User add-ons: `addons` (YAML written inline in cluster.yml) and `addons_include` (files, or http(s) URLs
fetched when `up` or `plan` runs). Each document must be one Kubernetes object (a `List` is unpacked);
every problem is reported at its line: cluster.yml's for inline add-ons, the included file's otherwise.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rke_py.config.yamlread import MAX_BYTES, YamlSyntaxError, decode, parse
from rke_py.errors import ConfigError, Problem

Obj = dict[str, Any]
SEPARATOR = re.compile(r"^---(\s.*)?$")
NAME = re.compile(r"[a-z0-9]([-a-z0-9.:]*[a-z0-9])?\Z", re.ASCII)  # what the API takes, `:` for RBAC
FETCH_TIMEOUT = 15


def documents(text: str, source: str, first_line: int = 1) -> tuple[list[Obj], list[Problem]]:
    """The objects of a multi-document YAML text whose first line is line `first_line` of `source`."""
    objects: list[Obj] = []
    problems: list[Problem] = []
    lines = text.splitlines()
    start = 0
    for index in [*(i for i, line in enumerate(lines) if SEPARATOR.match(line)), len(lines)]:
        chunk = "\n".join(lines[start:index])
        where = first_line + start
        start = index + 1
        if not chunk.strip():
            continue
        try:
            data, _ = parse(chunk, source)
        except YamlSyntaxError as exc:
            problems += [_shifted(p, where - 1) for p in exc.problems]
            continue
        items = data.get("items") if isinstance(data, dict) and data.get("kind") == "List" else [data]
        for item in items if isinstance(items, list) else [items]:
            problem = _invalid(item)
            if problem:
                problems.append(
                    Problem(source, where, 1, problem, "each document must be one Kubernetes object")
                )
            elif item is not None:
                objects.append(item)
    return objects, problems


def _shifted(problem: Problem, lines: int) -> Problem:
    return Problem(
        problem.file, problem.line + lines if problem.line else 0, problem.col, problem.message, problem.hint
    )


def _invalid(item: Any) -> str:
    if item is None:
        return ""
    if not isinstance(item, dict):
        return "an add-on document is not a mapping"
    missing = [key for key in ("apiVersion", "kind") if not isinstance(item.get(key), str) or not item[key]]
    metadata: dict[str, Any] = item["metadata"] if isinstance(item.get("metadata"), dict) else {}
    name = metadata.get("name")
    if missing:
        return f"an add-on object has no {' or '.join(missing)}"
    if not isinstance(name, str) or not NAME.match(name):
        return f"{item['kind']} has no valid metadata.name"
    namespace = metadata.get("namespace", "")
    if namespace and (not isinstance(namespace, str) or not NAME.match(namespace)):
        return f"{item['kind']} {name}: metadata.namespace is not a valid name"
    return ""


def inline_addons(text: str, source: str, line: int) -> tuple[list[Obj], list[Problem]]:
    """`addons: |` of cluster.yml, whose key is at `line` (the block starts on the next line)."""
    return documents(text, source, line + 1 if "\n" in text.strip() or text.startswith("\n") else line)


def included(entry: str, base: Path) -> tuple[list[Obj], list[Problem]]:
    """One addons_include entry: a file (relative to cluster.yml's folder) or an http(s) URL."""
    if entry.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(entry, timeout=FETCH_TIMEOUT) as answer:
                data = answer.read(MAX_BYTES + 1)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            return [], [
                Problem(
                    entry, 0, 0, f"cannot fetch the add-on: {getattr(exc, 'reason', exc)}", "check the URL"
                )
            ]
    else:
        path = Path(entry).expanduser()
        path = path if path.is_absolute() else base / path
        try:
            with path.open("rb") as file:
                data = file.read(MAX_BYTES + 1)
        except OSError as exc:
            return [], [
                Problem(str(path), 0, 0, f"cannot read the add-on file: {exc.strerror}", "check the path")
            ]
    if len(data) > MAX_BYTES:
        return [], [Problem(entry, 0, 0, f"the add-on is larger than {MAX_BYTES} bytes", "split it")]
    try:
        text = decode(data, entry)
    except YamlSyntaxError as exc:
        return [], exc.problems
    return documents(text, entry)


def user_objects(
    addons: str, includes: list[str], positions: dict, source: str, base: Path
) -> tuple[list[Obj], list[Obj]]:
    """(inline objects, included objects); raise ConfigError with every problem."""
    line = positions.get(("addons",), (1, 1))[0]
    inline, problems = inline_addons(addons, source, line) if addons.strip() else ([], [])
    files: list[Obj] = []
    for entry in includes:
        found, more = included(entry, base)
        files += found
        problems += more
    if problems:
        raise ConfigError(problems)
    return inline, files
