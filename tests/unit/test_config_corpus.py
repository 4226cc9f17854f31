"""Every file in tests/fixtures/config/{bad,hostile}/ yields exactly the lines in its .expected sibling.

The .expected file is what `rke-py validate` prints to stderr for that cluster.yml: errors by line, then
warnings. `bad/` holds honest mistakes; `hostile/` holds what an attacker or a fuzzer writes (tags, alias
bombs, shell characters in addresses, control characters), each file saying on its first line what it
tries. Files are read as bytes, as `rke-py` reads them. Add a case by adding the two files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rke_py.config import load_text
from rke_py.config.yamlread import YamlSyntaxError, decode
from rke_py.errors import ConfigError
from tests.cases import fixture_cases

FIXTURES = Path(__file__).parents[1] / "fixtures" / "config"
BAD = fixture_cases(FIXTURES / "bad")
HOSTILE = fixture_cases(FIXTURES / "hostile")


def reported_lines(data: bytes) -> list[str]:
    try:
        return [str(warning) for warning in load_text(decode(data, "cluster.yml"), "cluster.yml").warnings]
    except (ConfigError, YamlSyntaxError) as exc:
        return [str(problem) for problem in exc.problems]


def test_corpora_are_large_enough():
    assert len(BAD) >= 30
    assert len(HOSTILE) >= 80


@pytest.mark.parametrize(
    "case", BAD + HOSTILE, ids=[f"{case.parent.name}/{case.stem}" for case in BAD + HOSTILE]
)
def test_file_reports_exact_lines(case: Path):
    expected = case.with_suffix(".expected").read_text(encoding="utf-8").splitlines()
    lines = reported_lines(case.read_bytes())
    assert lines == expected
    assert all(line.isprintable() for line in lines)  # one line each, no escape sequence reaches a terminal
