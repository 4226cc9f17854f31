"""What one plan works out once for many nodes.

A thousand workers read the same config: their kubelets share every flag but a few, their proxies and
sidekicks are the same containers, their certificate files the same files. Inside `planning()` (one
`build_plan`, one config), `once(key, make)` makes a value the first time its key is asked for and hands
the same value out after; outside, it makes it every time. Keys name what the value depends on besides
the config; values are never changed by whoever gets them (tuples, frozen specs, dicts copied first).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

_memo: ContextVar[dict[Hashable, Any] | None] = ContextVar("plan_memo", default=None)


@contextlib.contextmanager
def planning() -> Iterator[None]:
    """One plan's memo, dropped when the plan is made (the next plan may have another config)."""
    token = _memo.set({})
    try:
        yield
    finally:
        _memo.reset(token)


def once(key: Hashable, make: Callable[[], T]) -> T:
    memo = _memo.get()
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    value: T = memo[key]
    return value
