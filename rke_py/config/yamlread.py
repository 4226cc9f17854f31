"""Read cluster.yml bytes into plain data plus the 1-based position of every mapping key and sequence item.

The file comes from a user, a generator or an attacker, so reading it is bounded: its size, how deep it
nests, and how many values its aliases expand to. Values are built from ruamel.yaml's node graph, not by
its constructors, so no tag can make a Python object: plain text, numbers, true/false, null, lists and
mappings come out; a tag that would make anything else, or whose value does not fit it (`!!int 45x`), is a
problem at its file:line:col. Dates stay the text they were written as, as RKE reads them into its strings.

Where libyaml's parser is there (through PyYAML), the values are built from its events in one pass:
ruamel.yaml's pure-Python parser takes over a second per thousand nodes. Tags are resolved by ruamel.yaml's
rules (YAML 1.2) either way. A file libyaml cannot read, or one using what the two parsers read apart, is
read by ruamel.yaml alone, as before, so its messages say what is wrong. Tests hold the two readings equal
wherever ruamel.yaml reads a file; libyaml also takes a few malformed block headers and comments
ruamel.yaml refuses (`>#`).
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

import yaml as libyaml
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, ReusedAnchorWarning, YAMLError
from ruamel.yaml.events import CollectionEndEvent, CollectionStartEvent, NodeEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.resolver import VersionedResolver

from rke_py.config.findings import Path
from rke_py.errors import Problem

Positions = dict[Path, tuple[int, int]]

MAX_BYTES = 1024 * 1024  # a cluster.yml with every certificate inline is a few hundred KiB
MAX_DEPTH = 64  # cluster.yml nests about 6 deep; an add-on's inline YAML is a string, not nesting
MAX_VALUES = 100_000  # after alias expansion; 100 nodes with every option set is a few thousand
MAX_INT_DIGITS = 18  # beyond this no setting is meaningful, and int() of thousands of digits is refused

CORE = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = (CORE + kind for kind in ("str", "int", "float", "bool", "null"))
MAP, SEQ, MERGE = (CORE + kind for kind in ("map", "seq", "merge"))
# Explicit tags a scalar may carry (mappings take only !!map, lists !!seq); other core tags (binary, omap,
# set, ...) and local ones (!x) are refused.
SCALAR_TAGS = {STR, INT, FLOAT, BOOL, NULL, "!"}
BOOL_TEXT = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}
NULL_TEXT = {"", "~", "null"}
INT_TEXT = re.compile(r"[-+]?(0o[0-7_]+|0x[0-9a-f_]+|[0-9][0-9_]*)", re.IGNORECASE | re.ASCII)
FLOAT_TEXT = re.compile(r"[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?", re.ASCII)
UNSUPPORTED_TAG_HINT = "remove the tag: cluster.yml holds text, numbers, true/false, null, lists and mappings"


class YamlSyntaxError(Exception):
    """The text cannot be read as cluster.yml data; carries every problem found (at least one)."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(problem) for problem in problems))


def decode(data: bytes, source: str) -> str:
    """The file's bytes as text; a size or encoding problem names where it is."""
    if len(data) > MAX_BYTES:
        raise YamlSyntaxError(
            [
                Problem(
                    source,
                    0,
                    0,
                    f"the file is larger than {MAX_BYTES // 1024} KiB; cluster.yml is a small text file",
                    "check that --config names your cluster.yml",
                )
            ]
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8", errors="replace")
        line, col = _line_col(before, len(before))
        raise YamlSyntaxError(
            [
                Problem(
                    source,
                    line,
                    col,
                    f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x})",
                    "save cluster.yml as UTF-8",
                )
            ]
        ) from None


def parse(text: str, source: str) -> tuple[Any, Positions]:
    """Return (plain data, positions). The root is at path () and position (1, 1)."""
    read = _read_libyaml(text, source)
    if read is not None:
        return read
    root, explicit = _compose_ruamel(text, source)
    builder = _Builder(source, explicit)
    positions: Positions = {(): (1, 1)}
    data = None if root is None else builder.value(root, (), positions, 0)
    if builder.problems:
        raise YamlSyntaxError(builder.problems)
    return data, positions


def _compose_ruamel(text: str, source: str) -> tuple[Node | None, set[int]]:
    yaml = YAML(typ="rt")
    try:
        explicit = _scan(yaml, text, source)
        with warnings.catch_warnings():  # a reused anchor is valid YAML: the later one counts
            warnings.simplefilter("ignore", ReusedAnchorWarning)
            return yaml.compose(text), explicit
    except ReaderError as exc:
        raise YamlSyntaxError([_reader_problem(exc, text, source)]) from None
    except MarkedYAMLError as exc:
        raise YamlSyntaxError([_syntax_problem(exc, source)]) from None
    except YAMLError as exc:
        raise YamlSyntaxError([Problem(source, 0, 0, f"YAML syntax error: {_one_line(str(exc))}")]) from None


LIBYAML_APART = ("\t", "\x85", "\u2028", "\u2029", "\ufeff")
_RESOLVER = VersionedResolver()  # YAML 1.2's implicit tags, as ruamel.yaml's own reading resolves them


def _read_libyaml(text: str, source: str) -> tuple[Any, Positions] | None:
    """(data, positions) straight from libyaml's events, in one flat pass (nesting is bounded as it goes),
    as the node graph's walk would give them. None when libyaml is missing, or the file needs ruamel.yaml's
    own reading: an error to report (a duplicate key, a key that is a list or a mapping, too many values),
    or what the two read apart (tabs, YAML 1.1's line breaks, a byte order mark, anchors, aliases, merges,
    tags, directives, documents)."""
    if not libyaml.__with_libyaml__ or any(c in text for c in LIBYAML_APART):
        return None
    positions: Positions = {(): (1, 1)}
    # the collections being read: [the collection, its path, the key waiting for a value and its place]
    open_: list[list[Any]] = []
    data: Any = None
    documents = values = 0
    try:
        for event in libyaml.parse(text, Loader=libyaml.CBaseLoader):
            kind = type(event)
            if kind is libyaml.DocumentStartEvent:
                documents += 1
                if documents > 1 or event.version or event.tags:
                    return None
                continue
            if kind in (libyaml.SequenceEndEvent, libyaml.MappingEndEvent):
                open_.pop()
                continue
            if kind is libyaml.AliasEvent or getattr(event, "anchor", None) or getattr(event, "tag", None):
                return None
            where = (event.start_mark.line + 1, event.start_mark.column + 1)
            top = open_[-1] if open_ else None
            if top is not None and isinstance(top[0], dict) and top[2] is None:  # a key, taken as written
                # a list or mapping as a key, a duplicate or a merge ("<<"): ruamel.yaml's reading says
                if kind is not libyaml.ScalarEvent or event.value in top[0] or event.value == "<<":
                    return None
                top[2] = (event.value, where)
                continue
            value: Any
            if kind is libyaml.ScalarEvent:
                value = _plain(_implicit(event), event.value)
            elif kind in (libyaml.SequenceStartEvent, libyaml.MappingStartEvent):
                if len(open_) >= MAX_DEPTH:
                    raise YamlSyntaxError([_too_deep(source, *where)])
                value = [] if kind is libyaml.SequenceStartEvent else {}
            else:
                continue
            path: Path = ()
            if top is None:
                data = value
            elif isinstance(top[0], list):
                path = (*top[1], len(top[0]))
                top[0].append(value)
                positions[path] = where
            else:
                path = (*top[1], top[2][0])
                top[0][path[-1]] = value
                positions[path] = top[2][1]
                top[2] = None
            values += 1
            if values > MAX_VALUES:
                return None
            if isinstance(value, list | dict):
                open_.append([value, path, None])
    except libyaml.YAMLError:
        return None
    return data, positions


def _implicit(scalar: Any) -> str:
    """The tag a plain or quoted scalar resolves to, by ruamel.yaml's rules."""
    return str(_RESOLVER.resolve(ScalarNode, scalar.value, scalar.implicit))


def _scan(yaml: YAML, text: str, source: str) -> set[int]:
    """Refuse nesting beyond MAX_DEPTH before the (recursive) composer sees it; return explicit tags' places.

    The parser is an event stream, so this walk is flat however deep the file goes.
    """
    depth = 0
    explicit: set[int] = set()
    for event in yaml.parse(text):
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line, col = event.start_mark.line + 1, event.start_mark.column + 1
                raise YamlSyntaxError([_too_deep(source, line, col)])
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
        if isinstance(event, NodeEvent) and getattr(event, "tag", None) is not None:
            explicit.add(event.start_mark.index)
    return explicit


def _too_deep(source: str, line: int, col: int) -> Problem:
    return Problem(
        source,
        line,
        col,
        f"the file nests lists and mappings more than {MAX_DEPTH} levels deep",
        "cluster.yml nests a few levels; check for a runaway list, or an alias used inside its own anchor",
    )


class _Builder:
    """Turns composed nodes into plain values, one budget of values for the whole file."""

    def __init__(self, source: str, explicit: set[int]):
        self.source = source
        self.explicit = explicit
        self.problems: list[Problem] = []
        self.count = 0

    def value(self, node: Node, path: Path, positions: Positions, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_VALUES or depth > MAX_DEPTH:
            raise YamlSyntaxError([self._budget_problem(node, depth)])
        if self._is_explicit(node) and not _tag_fits(node):
            self._problem(
                node, f'the YAML tag "{_short(str(node.tag))}" is not supported here', UNSUPPORTED_TAG_HINT
            )
            return None
        if isinstance(node, MappingNode):
            return self._mapping(node, path, positions, depth)
        if isinstance(node, SequenceNode):
            out = []
            for index, item in enumerate(node.value):
                child = (*path, index)
                positions[child] = _at(item)
                out.append(self.value(item, child, positions, depth + 1))
            return out
        return self._scalar(node)

    def _mapping(self, node: MappingNode, path: Path, positions: Positions, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        seen: dict[str, int] = {}
        merged: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == MERGE:
                merged.extend(value_node.value if isinstance(value_node, SequenceNode) else [value_node])
                continue
            if not isinstance(key_node, ScalarNode):
                self._problem(
                    key_node, "a mapping key must be text, not a list or mapping", 'write "key: value"'
                )
                continue
            if self._is_explicit(key_node) and not _tag_fits(key_node):
                tag = _short(str(key_node.tag))
                self._problem(key_node, f'the YAML tag "{tag}" is not supported here', UNSUPPORTED_TAG_HINT)
                continue
            key = str(key_node.value)
            if key in seen:
                self._problem(
                    key_node,
                    f'duplicate key "{key}" (first on line {seen[key]})',
                    "a key may appear only once in a mapping; remove or merge the repeated one",
                )
                continue
            seen[key] = key_node.start_mark.line + 1
            child = (*path, key)
            positions[child] = _at(key_node)
            out[key] = self.value(value_node, child, positions, depth + 1)
        for source in merged:
            self._merge(source, out, path, positions, depth)
        return out

    def _merge(self, node: Node, out: dict[str, Any], path: Path, positions: Positions, depth: int) -> None:
        """`<<: *anchor`: the anchored mapping's keys, where the mapping does not set them itself."""
        if not isinstance(node, MappingNode):
            self._problem(node, 'a "<<" merge takes a mapping or a list of mappings', 'e.g. "<<: *defaults"')
            return
        for key, value in self._mapping(node, path, {}, depth).items():
            if key not in out:
                out[key] = value
                positions.setdefault((*path, key), _at(node))

    def _scalar(self, node: Node) -> Any:
        text = str(node.value)
        if (
            getattr(node, "style", None) == ">"
        ):  # ruamel.yaml marks where a folded scalar folds; its constructor drops them
            text = text.replace("\a", "")
        tag = str(node.tag)
        if (
            tag in (INT, FLOAT, BOOL, NULL)
            and self._is_explicit(node)
            and _typed(tag, text.strip()) is _NOT_TYPED
        ):
            hint = f"remove the tag, or write a valid {_short(tag)} value"
            self._problem(node, f'"{text}" is not a valid {_short(tag)} value', hint)
            return None
        return _plain(tag, text)

    def _is_explicit(self, node: Node) -> bool:
        return node.start_mark.index in self.explicit

    def _problem(self, node: Node, message: str, hint: str) -> None:
        line, col = _at(node)
        self.problems.append(Problem(self.source, line, col, message, hint))

    def _budget_problem(self, node: Node, depth: int) -> Problem:
        line, col = _at(node)
        if depth > MAX_DEPTH:
            return _too_deep(self.source, line, col)
        return Problem(
            self.source,
            line,
            col,
            f"the file's aliases expand to more than {MAX_VALUES} values",
            "use each &anchor a few times at most",
        )


_NOT_TYPED = object()


def _plain(tag: str, text: str) -> Any:
    """A scalar's value by its resolved tag: text, a date, or a local "!" tag stay the text as written, as
    do numbers no setting takes (.inf, .nan)."""
    if tag not in (INT, FLOAT, BOOL, NULL):
        return text
    value = _typed(tag, text.strip())
    return text if value is _NOT_TYPED else value


def _typed(tag: str, text: str) -> Any:
    """`text` as the value `tag` names, or _NOT_TYPED when it is not one."""
    lower = text.lower()
    if tag == NULL and lower in NULL_TEXT:
        return None
    if tag == BOOL and lower in BOOL_TEXT:
        return BOOL_TEXT[lower]
    if tag == INT and INT_TEXT.fullmatch(text):
        return _int(text)
    if tag == FLOAT and FLOAT_TEXT.fullmatch(text):
        number = float(text.replace("_", ""))
        return number if math.isfinite(number) else _NOT_TYPED
    return _NOT_TYPED


def _int(text: str) -> Any:
    """A YAML integer as int; one too long to be a setting stays text (a validator then refuses it)."""
    digits = text.lstrip("+-").replace("_", "")
    if len(digits) > MAX_INT_DIGITS + 2:  # room for an 0x/0o prefix
        return text
    try:
        return int(text.replace("_", ""), 0 if digits[:2].lower() in ("0x", "0o") else 10)
    except ValueError:
        return _NOT_TYPED


def _tag_fits(node: Node) -> bool:
    """An explicit tag rke-py can honour, on the kind of node it is for."""
    if isinstance(node, MappingNode):
        return node.tag == MAP
    if isinstance(node, SequenceNode):
        return node.tag == SEQ
    return node.tag in SCALAR_TAGS


def _short(tag: str) -> str:
    return "!!" + tag[len(CORE) :] if tag.startswith(CORE) else tag


def _at(node: Node) -> tuple[int, int]:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


def _line_col(text: str, index: int) -> tuple[int, int]:
    before = text[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


def _reader_problem(exc: ReaderError, text: str, source: str) -> Problem:
    line, col = _line_col(text, exc.position)
    character = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
    return Problem(
        source,
        line,
        col,
        f"the file contains the control character U+{character:04X}, which YAML does not allow",
        "remove it; cluster.yml is plain text",
    )


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
    if "single document" in what:
        return 'cluster.yml holds one YAML document; remove the "---" line and what follows'
    if "\\t" in what or "tab" in what:
        return "YAML indentation must use spaces, not tabs"
    return "check the indentation, colons and quoting on this line and the one before"


def _one_line(text: str) -> str:
    return " ".join(text.split())
