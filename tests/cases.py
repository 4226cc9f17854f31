"""Fixture globs that cannot come back empty: a parametrised test over no files would pass by skipping."""

from __future__ import annotations

from pathlib import Path


def fixture_cases(directory: Path, pattern: str = "*.yml") -> list[Path]:
    """The files of `directory` matching `pattern`, sorted; an error at collection time if none."""
    found = sorted(directory.glob(pattern))
    if not found:
        raise RuntimeError(f"no fixtures match {directory}/{pattern}: a moved or deleted fixture directory?")
    return found
