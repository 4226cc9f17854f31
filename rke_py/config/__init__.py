"""Read an RKE `cluster.yml` into a typed, defaulted, validated ClusterConfig.

`load` reads the one file and nothing else (no network, no SSH keys), so it is safe to run anywhere, e.g.
in CI on every change to cluster.yml; the caller passes what the cluster's state records, where it has it.
Problems are collected in one pass and raised together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rke_py.config import defaults, kdm, mapping, validate, validate_ignored
from rke_py.config.findings import Findings
from rke_py.config.schema import ClusterConfig
from rke_py.config.yamlread import MAX_BYTES, YamlSyntaxError, decode, parse
from rke_py.errors import ConfigError, Problem

__all__ = ["ClusterConfig", "ConfigError", "Loaded", "load", "load_text"]


@dataclass
class Loaded:
    """A valid configuration and the warnings found while loading it."""

    config: ClusterConfig
    warnings: list[Problem] = field(default_factory=list)


def load(path: str | Path, *, strict: bool = False, recorded: kdm.Recorded | None = None) -> Loaded:
    """Load the file at `path`; problems are reported as `<path as given>:LINE:COL`. `recorded`: the images
    the cluster's state holds for its version, used where rke-py lists none."""
    source = str(path)
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_BYTES + 1)  # bounded: --config /dev/zero must not read forever
    except FileNotFoundError:
        raise ConfigError([_missing(source)]) from None
    except OSError as exc:
        raise ConfigError([Problem(source, 0, 0, f"cannot read {source}: {exc.strerror or exc}")]) from None
    try:
        text = decode(data, source)
    except YamlSyntaxError as exc:
        raise ConfigError(exc.problems) from None
    return load_text(text, source, strict=strict, recorded=recorded)


def _missing(source: str) -> Problem:
    return Problem(
        source,
        0,
        0,
        "config file not found",
        'run "rke-py config" to write one, or pass --config PATH',
    )


def load_text(
    text: str, source: str = "cluster.yml", *, strict: bool = False, recorded: kdm.Recorded | None = None
) -> Loaded:
    """Load cluster.yml content; `source` is the name used in problem messages."""
    try:
        data, positions = parse(text, source)
    except YamlSyntaxError as exc:
        raise ConfigError(exc.problems) from None
    findings = Findings(source, positions)
    config = _build(data, findings, recorded)
    config.positions = positions
    config.source = source
    errors, warnings = findings.result(strict)
    if errors:
        raise ConfigError([*errors, *warnings])
    return Loaded(config, warnings)


def _build(data: Any, findings: Findings, recorded: kdm.Recorded | None) -> ClusterConfig:
    if not isinstance(data, dict):
        _not_a_mapping(data, findings)
        return ClusterConfig()
    config = mapping.to_config(data, findings)
    validate_ignored.as_given(config, findings)  # before the defaults overwrite what RKE ignores
    defaults.apply(config, recorded)
    validate.validate(config, findings)
    return config


def _not_a_mapping(data: Any, findings: Findings) -> None:
    if data is None:
        findings.positions.clear()
        findings.error((), "the file is empty", 'add at least "nodes:"; "rke-py config" writes a file')
        return
    findings.error(
        (),
        f"the top level must be a mapping (nodes:, services:, ...), not {_kind(data)}",
        'start the file with keys such as "nodes:" at column 1',
    )


def _kind(data: Any) -> str:
    return "a list" if isinstance(data, list) else f"a {type(data).__name__}"
