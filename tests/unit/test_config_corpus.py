"""Every file in tests/fixtures/config/bad/ yields exactly the lines in its .expected sibling.

The .expected file is what `rke-py validate` prints to stderr for that cluster.yml: errors by line, then
warnings. Add a case by adding the two files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rke_py.config import load_text
from rke_py.errors import ConfigError
from tests.cases import fixture_cases

BAD = Path(__file__).parents[1] / "fixtures" / "config" / "bad"
CASES = fixture_cases(BAD)


def reported_lines(text: str) -> list[str]:
    try:
        return [str(warning) for warning in load_text(text, "cluster.yml").warnings]
    except ConfigError as exc:
        return [str(problem) for problem in exc.problems]


def test_corpus_is_large_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[case.stem for case in CASES])
def test_bad_file_reports_exact_lines(case: Path):
    expected = case.with_suffix(".expected").read_text(encoding="utf-8").splitlines()
    assert reported_lines(case.read_text(encoding="utf-8")) == expected
