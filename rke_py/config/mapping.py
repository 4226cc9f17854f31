"""Map parsed YAML onto the schema dataclasses, reporting wrong types and unknown keys as it goes.

The dataclass type hints drive the conversion, so a field added to `schema.py` is read from YAML with no
code here. Following RKE (yaml.v2), an empty value (`""`, `null`, `{}`, `[]`) means "use the default".
Where yaml.v2 would be stricter than needed, rke-py accepts the value if its meaning is clear: a number where
RKE has a string (`port: 22`), and YAML 1.1 booleans (`yes`, `on`).

A single value where RKE expects a list (`role: etcd`) is an error, as it is for RKE's yaml.v2: rke-py
could guess, but a file rke-py accepts should also work with `rke`, so the message says to write
`role: [etcd]`. Checks that read the list then see `[etcd]`, so the one mistake yields one message.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from functools import cache
from typing import Any

from rke_py.config import schema
from rke_py.config.findings import Findings, Path, did_you_mean, dotted, excerpt

# YAML key -> field name, where they differ.
RENAMES = {"kube-api": "kube_api", "kube-controller": "kube_controller"}
YAML_NAMES = {field: key for key, field in RENAMES.items()}
# Fields that are not YAML keys.
INTERNAL = {"positions", "source", "extra", "encryption_provider"}
# RKE keys kept as plain data in `extra` (the network provider sub-objects and addon scheduling).
EXTRA_KEYS: dict[type, frozenset[str]] = {
    schema.Network: frozenset(
        {
            "calico_network_provider",
            "canal_network_provider",
            "flannel_network_provider",
            "weave_network_provider",
            "aci_network_provider",
        }
    )
}
# RKE keys kept in `extra` by prefix (the ACI images; validate_ignored names them).
EXTRA_PREFIXES: dict[type, str] = {schema.SystemImages: "aci_"}
INT_TEXT = re.compile(r"-?[0-9]{1,18}", re.ASCII)  # not str.isdigit(), which takes "²" and "⑤"
FLOAT_TEXT = re.compile(r"-?[0-9]{1,18}(\.[0-9]{1,18})?", re.ASCII)
YAML11_BOOLS = {"yes": True, "on": True, "y": True, "no": False, "off": False, "n": False}


def to_config(data: dict[str, Any], findings: Findings) -> schema.ClusterConfig:
    """The ClusterConfig that `data` describes; problems go to `findings`."""
    return _dataclass(schema.ClusterConfig, data, (), findings)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fields(cls: type) -> dict[str, str]:
    """YAML key -> field name for the fields of `cls` that come from YAML."""
    names = [f.name for f in dataclasses.fields(cls) if f.name not in INTERNAL]
    return {YAML_NAMES.get(name, name): name for name in names}


def _dataclass(cls: type, data: dict[str, Any], path: Path, findings: Findings) -> Any:
    fields = _fields(cls)
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, raw in data.items():
        child = (*path, key)
        if key in fields:
            values[fields[key]] = convert(_hints(cls)[fields[key]], raw, child, findings)
        elif _extra(cls, key):
            extra[key] = raw
        else:
            _unknown_key(key, path, [*fields, *EXTRA_KEYS.get(cls, ())], findings)
    if extra:
        values["extra"] = extra
    return cls(**{name: value for name, value in values.items() if value is not None or _nullable(cls, name)})


def _nullable(cls: type, name: str) -> bool:
    return _optional(_hints(cls)[name]) is not None


def _extra(cls: type, key: str) -> bool:
    prefix = EXTRA_PREFIXES.get(cls)
    return key in EXTRA_KEYS.get(cls, ()) or bool(prefix and key.startswith(prefix))


def _unknown_key(key: str, path: Path, known: list[str], findings: Findings) -> None:
    under = f'under "{dotted(path)}"' if path else "at the top level"
    hint = "remove it or check the spelling" + did_you_mean(key, tuple(known))
    findings.warning((*path, key), f'unknown key "{key}" {under} is ignored', hint)


def _optional(hint: Any) -> Any:
    """For `X | None` return X, else None."""
    if isinstance(hint, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else None
    return None


def convert(hint: Any, raw: Any, path: Path, findings: Findings) -> Any:
    """`raw` as the type `hint`; None (not the field default) when it is empty or wrong."""
    inner = _optional(hint)
    if inner is not None:
        return None if raw is None else convert(inner, raw, path, findings)
    if raw is None:
        return None
    origin = typing.get_origin(hint)
    if origin is list:
        return _list(typing.get_args(hint)[0], raw, path, findings)
    if origin is dict:
        return _dict(typing.get_args(hint)[1], raw, path, findings)
    if dataclasses.is_dataclass(hint):
        return _nested(hint, raw, path, findings)
    return _scalar(hint, raw, path, findings)


def _nested(cls: Any, raw: Any, path: Path, findings: Findings) -> Any:
    if not isinstance(raw, dict):
        findings.type_error(path, f"{dotted(path)} must be a mapping, not {_kind(raw)}", _mapping_hint(path))
        return None
    return _dataclass(cls, raw, path, findings)


def _list(item: Any, raw: Any, path: Path, findings: Findings) -> list[Any] | None:
    if not isinstance(raw, list):
        findings.type_error(
            path, f"{dotted(path)} must be a list, not {_kind(raw)}", _list_hint(path, raw, item)
        )
        # Keep what the user meant, so checks elsewhere (e.g. "no etcd node") do not pile on.
        return [_str(raw)] if item is str and not isinstance(raw, dict) else None
    items = [convert(item, value, (*path, i), findings) for i, value in enumerate(raw)]
    # A placeholder keeps indexes aligned with positions; checks stay quiet on it or report it as empty.
    return [_empty(item) if value is None else value for value in items]


def _empty(hint: Any) -> Any:
    if hint is Any:
        return None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint()
    origin = typing.get_origin(hint)
    return origin() if origin in (list, dict) else hint()


def _dict(value_hint: Any, raw: Any, path: Path, findings: Findings) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        findings.type_error(path, f"{dotted(path)} must be a mapping, not {_kind(raw)}", _mapping_hint(path))
        return None
    if value_hint is Any:
        return raw
    out = {}
    for key, value in raw.items():
        converted = _dict_value(value_hint, value, (*path, key), findings)
        if converted is not None:
            out[key] = converted
    return out


def _dict_value(hint: Any, raw: Any, path: Path, findings: Findings) -> Any:
    if hint is str and isinstance(raw, dict | list):
        findings.type_error(
            path, f"{dotted(path)} must be a single value, not {_kind(raw)}", _scalar_value_hint(path)
        )
        return None
    if hint is str and raw is None:
        return ""
    return convert(hint, raw, path, findings)


def _scalar(hint: Any, raw: Any, path: Path, findings: Findings) -> Any:
    if hint is Any:
        return raw
    if isinstance(raw, dict | list):
        findings.type_error(
            path,
            f"{dotted(path)} must be a single value, not {_kind(raw)}",
            'quote it if it contains ": " or starts with "{" or "["',
        )
        return None
    if hint is bool:
        return _bool(raw, path, findings)
    if hint is int:
        return _int(raw, path, findings)
    if hint is float:
        return _float(raw, path, findings)
    return _str(raw)


def _str(raw: Any) -> str:
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return str(raw)


def _bool(raw: Any, path: Path, findings: Findings) -> bool | None:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in YAML11_BOOLS:
        return YAML11_BOOLS[raw.lower()]
    findings.type_error(
        path, f'{dotted(path)} must be true or false, not "{excerpt(raw)}"', "write true or false"
    )
    return None


def _int(raw: Any, path: Path, findings: Findings) -> int | None:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and INT_TEXT.fullmatch(raw.strip()):
        return int(raw)
    findings.type_error(
        path, f'{dotted(path)} must be a whole number, not "{excerpt(raw)}"', "write a number, e.g. 45"
    )
    return None


def _float(raw: Any, path: Path, findings: Findings) -> float | None:
    if isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw):
        return float(raw)
    if isinstance(raw, str) and FLOAT_TEXT.fullmatch(raw.strip()):
        return float(raw)
    findings.type_error(
        path, f'{dotted(path)} must be a number, not "{excerpt(raw)}"', "write a number, e.g. 4"
    )
    return None


def _kind(raw: Any) -> str:
    if isinstance(raw, dict):
        return "a mapping"
    if isinstance(raw, list):
        return "a list"
    return f'the {"string" if isinstance(raw, str) else type(raw).__name__} "{excerpt(raw)}"'


def _list_hint(path: Path, raw: Any, item: Any) -> str:
    key = path[-1]
    if item is str and isinstance(raw, str | int | float) and not isinstance(raw, bool):
        return f'write "{key}: [{raw}]"'
    return f'write one "- item" per line under "{key}:"'


def _mapping_hint(path: Path) -> str:
    return f'write "key: value" lines indented under "{path[-1]}:"'


def _scalar_value_hint(path: Path) -> str:
    if path and len(path) > 1 and str(path[-2]).startswith("extra_args"):
        return (
            'extra_args values are strings, e.g. "v: 2"; use extra_args_array for a flag given several times'
        )
    return "quote it if it is meant as text"
