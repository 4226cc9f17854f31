"""Phases as objects, and the small runner that runs a command's list of them.

A command (`up`, `remove`, `status`, ...) is a list of phases. Each phase says what it is (`key`,
`title`), what it would change (`planned`, from the diff), whether it has work, and does it (`run`).
Phases that only read (`reads`) also run under `plan`, which otherwise collects what each phase would do
and changes nothing; so `plan` and `up` cannot disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from rke_py.deploy.actions import Action

log = logging.getLogger("rke_py.deploy")


class Phase:
    key: str = ""  # short name: progress, logs, the `phase` of an action
    title: str = ""  # what a person reads while it runs
    reads: bool = False  # only reads hosts or the API: runs under `plan` too

    def planned(self) -> Sequence[Action]:
        """What this phase would change, from the diff (available once the reading phases ran)."""
        return ()

    def has_work(self) -> bool:
        return self.reads or bool(self.planned())

    def run(self) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        """Called for every phase that started, in reverse order, whether the command failed or not."""


def run_phases(
    phases: Sequence[Phase], *, dry_run: bool = False, on_phase: Callable[[Phase], None] = lambda p: None
) -> list[Action]:
    """Run `phases` in order, skipping those without work; with `dry_run`, run only the reading phases and
    return what the others would change, in order."""
    planned: list[Action] = []
    started: list[Phase] = []
    try:
        for phase in phases:
            if dry_run and not phase.reads:
                planned.extend(phase.planned())
                continue
            if not phase.has_work():
                log.debug("phase %s: nothing to do", phase.key)
                continue
            on_phase(phase)
            started.append(phase)
            phase.run()
    finally:
        for phase in reversed(started):
            phase.cleanup()
    return planned
