"""Bounded parallelism over hosts, collecting every host's failure instead of stopping at the first."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from rke_py.errors import HostError, RkePyError

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_CONCURRENCY = 50  # RKE's worker count: enough for 100 hosts in two waves


def for_each(
    items: Iterable[T], fn: Callable[[T], R], concurrency: int
) -> tuple[list[tuple[T, R]], list[HostError]]:
    """Run `fn` on every item, at most `concurrency` at once.

    Returns (item, result) for the items that succeeded, in item order, and the HostErrors of the rest.
    """
    items = list(items)
    if not items:
        return [], []
    results: list[tuple[T, R]] = []
    errors: list[HostError] = []
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(items)))) as pool:
        futures = [(item, pool.submit(fn, item)) for item in items]
        try:
            for item, future in futures:
                try:
                    results.append((item, future.result()))
                except HostError as exc:
                    errors.append(exc)
        except BaseException:  # Ctrl-C, SIGTERM: hosts begun finish their step, the rest are not begun
            pool.shutdown(cancel_futures=True)
            raise
    return results, errors


def for_all(items: Iterable[T], fn: Callable[[T], R], concurrency: int) -> list[tuple[T, R]]:
    """`for_each`, raising every item's failure at once (as one error of the first one's kind)."""
    results, errors = for_each(items, fn, concurrency)
    if errors:
        raise combined(errors, type(errors[0]))
    return results


def combined(errors: list[HostError], kind: type[HostError]) -> RkePyError:
    """Several hosts' failures as one error of `kind` that names them all."""
    if len(errors) == 1:
        return errors[0]
    first = errors[0]
    error = kind(first.host, first.step, first.detail, first.log_tail)
    error.args = ("\n".join(str(e) for e in errors),)
    return error
