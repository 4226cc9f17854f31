"""The phase runner every command uses: order, skipping, dry runs and cleanup, shown with fake phases."""

from __future__ import annotations

import pytest

from rke_py.config.schema import Node
from rke_py.deploy.actions import SyncNode
from rke_py.deploy.phases import Phase, run_phases


class Fake(Phase):
    def __init__(self, key: str, log: list[str], *, work: int = 1, reads: bool = False, fails: bool = False):
        self.key = key
        self.title = f"phase {key}"
        self.log = log
        self.reads = reads
        self.fails = fails
        self.work = [SyncNode(f"{key}-{i}", Node(address=key)) for i in range(work)]

    def planned(self):
        return self.work

    def run(self) -> None:
        self.log.append(f"run {self.key}")
        if self.fails:
            raise RuntimeError(f"{self.key} failed")

    def cleanup(self) -> None:
        self.log.append(f"cleanup {self.key}")


def test_phases_run_in_order_and_those_without_work_are_skipped():
    log: list[str] = []
    shown: list[str] = []
    phases = [Fake("a", log), Fake("b", log, work=0), Fake("c", log, work=0, reads=True), Fake("d", log)]
    run_phases(phases, on_phase=lambda p: shown.append(p.title))
    assert log == ["run a", "run c", "run d", "cleanup d", "cleanup c", "cleanup a"]
    assert shown == ["phase a", "phase c", "phase d"]


def test_a_dry_run_runs_only_reading_phases_and_returns_what_the_others_would_do():
    log: list[str] = []
    phases = [Fake("read", log, work=0, reads=True), Fake("x", log, work=2), Fake("y", log)]
    planned = run_phases(phases, dry_run=True)
    assert log == ["run read", "cleanup read"]
    assert [a.name for a in planned] == ["x-0", "x-1", "y-0"]


def test_a_failure_stops_the_phases_after_it_and_still_cleans_up_the_started_ones():
    log: list[str] = []
    phases = [Fake("a", log), Fake("b", log, fails=True), Fake("c", log)]
    with pytest.raises(RuntimeError, match="b failed"):
        run_phases(phases)
    assert log == ["run a", "run b", "cleanup b", "cleanup a"]
