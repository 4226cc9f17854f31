"""Reading kubeconfig files without a YAML library.

The lab image has only the standard library, so this reads JSON and the block-style YAML subset that
kubeconfig files are written in (mappings, ``- `` sequences, plain and quoted scalars, comments), and
refuses anything else rather than guess.
"""

import json
import re

_KEY = re.compile(r"""^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^'"#:][^:#]*?|[^'"#:]*)\s*:(?:\s+|$)(.*)$""")


class KubeconfigError(Exception):
    """The file is not a kubeconfig this reader understands."""


def _scalar(text: str) -> object:
    text = text.strip()
    if text.startswith('"'):
        return json.loads(text)
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    if text in ("", "~", "null"):
        return None
    if text in ("true", "false"):
        return text == "true"
    if text == "{}":
        return {}
    if text == "[]":
        return []
    if text[:1] in "{[&*!|>%@`":
        raise KubeconfigError(f"unsupported YAML value: {text!r}")
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def parse_yaml(text: str) -> object:
    """Parse the block-YAML subset used by kubeconfig files."""
    lines = []
    for raw in text.splitlines():
        line = _strip_comment(raw)
        if line.strip() and line.strip() not in ("---", "..."):
            if "\t" in line[: len(line) - len(line.lstrip())]:
                raise KubeconfigError("tabs are not allowed in YAML indentation")
            lines.append((len(line) - len(line.lstrip(" ")), line.strip()))
    value, pos = _block(lines, 0, lines[0][0] if lines else 0)
    if pos != len(lines):
        raise KubeconfigError(f"unexpected indentation at: {lines[pos][1]!r}")
    return value


def _block(lines: list[tuple[int, str]], pos: int, indent: int) -> tuple[object, int]:
    if pos >= len(lines):
        return None, pos
    if lines[pos][1].startswith("- ") or lines[pos][1] == "-":
        return _sequence(lines, pos, indent)
    return _mapping(lines, pos, indent)


def _sequence(lines: list[tuple[int, str]], pos: int, indent: int) -> tuple[list, int]:
    items = []
    while pos < len(lines) and lines[pos][0] == indent and (lines[pos][1] + " ").startswith("- "):
        rest = lines[pos][1][1:].lstrip()
        if not rest:
            value, pos = (
                _block(lines, pos + 1, lines[pos + 1][0]) if pos + 1 < len(lines) else (None, pos + 1)
            )
        elif _KEY.match(rest):
            inner = indent + 1 + (len(lines[pos][1]) - 1 - len(rest))
            value, pos = _mapping([*lines[:pos], (inner, rest), *lines[pos + 1 :]], pos, inner)
        else:
            value, pos = _scalar(rest), pos + 1
        items.append(value)
    return items, pos


def _mapping(lines: list[tuple[int, str]], pos: int, indent: int) -> tuple[dict, int]:
    result: dict = {}
    while pos < len(lines) and lines[pos][0] == indent:
        match = _KEY.match(lines[pos][1])
        if not match:
            raise KubeconfigError(f"expected 'key: value', got {lines[pos][1]!r}")
        key = _scalar(match.group(1))
        rest = match.group(2).strip()
        pos += 1
        if rest:
            result[key] = _scalar(rest)
        elif pos < len(lines) and (
            lines[pos][0] > indent or (lines[pos][0] == indent and lines[pos][1].startswith("-"))
        ):
            result[key], pos = _block(lines, pos, lines[pos][0])
        else:
            result[key] = None
    return result, pos


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    data = json.loads(text) if text.lstrip().startswith("{") else parse_yaml(text)
    if not isinstance(data, dict):
        raise KubeconfigError(f"{path}: not a kubeconfig")
    return data


def _named(entries: list | None, name: str, what: str, path: str) -> dict:
    for entry in entries or []:
        if entry.get("name") == name:
            return entry.get(what) or {}
    raise KubeconfigError(f'{path}: {what} "{name}" not found')


def current(path: str) -> tuple[dict, dict]:
    """The (cluster, user) entries selected by ``current-context`` (or the only context)."""
    data = load(path)
    contexts = data.get("contexts") or []
    name = data.get("current-context") or (contexts[0]["name"] if len(contexts) == 1 else None)
    if not name:
        raise KubeconfigError(f"{path}: no current-context")
    context = _named(contexts, name, "context", path)
    cluster = _named(data.get("clusters"), context.get("cluster"), "cluster", path)
    user = _named(data.get("users"), context.get("user"), "user", path)
    if not cluster.get("server"):
        raise KubeconfigError(f"{path}: cluster has no server")
    return cluster, user
