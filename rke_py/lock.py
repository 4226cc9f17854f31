"""A per-cluster lock so two runs against the same cluster.yml never overlap.

flock is released by the kernel when the process exits, however it exits, so a crashed run never leaves
a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from rke_py.errors import LockedError
from rke_py.files import open_private


def lock_path_for(config_path: Path) -> Path:
    return config_path.parent / f".{config_path.name}.rke-py.lock"


@contextlib.contextmanager
def cluster_lock(config_path: Path) -> Iterator[None]:
    path = lock_path_for(Path(config_path))
    fd = open_private(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise LockedError(
                f"another rke-py run is working on {config_path} ({holder}); "
                "wait for it to finish — the lock is released when it exits"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, started {time.strftime('%Y-%m-%dT%H:%M:%S%z')}".encode(), 0)
        yield
    finally:
        os.close(fd)
