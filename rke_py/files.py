"""Writing local files that hold secrets: atomically, and never readable by others, not even for a moment."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from rke_py.errors import UsageError


def write_private_file(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Replace `path` with `data`, mode 0600 from creation; a crash leaves the old file or the new one.

    The temporary file is made in the target's directory (mkstemp creates it 0600) so `os.replace` is an
    atomic rename on the same filesystem; data and directory are fsynced before and after.
    """
    target = Path(path)
    directory = target.parent
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def set_aside(path: Path) -> Path | None:
    """Rename an existing `path` to `<name>.<UTC time>` before a command writes it anew (as RKE keeps the
    old state file and kubeconfig); the new name, or None when there was nothing to keep."""
    if not path.exists():
        return None
    kept = path.with_name(f"{path.name}.{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}")
    path.replace(kept)
    return kept


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """Open (creating) `path` 0600 without following a symbolic link, as a descriptor; an existing file that
    others could read is narrowed to 0600. Raises UsageError when `path` is a link or cannot be opened."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(f"{path} is a symbolic link; rke-py does not write through links") from None
        raise UsageError(f"cannot open {path}: {exc.strerror or exc}") from None
    if os.fstat(fd).st_mode & 0o077:
        os.fchmod(fd, 0o600)
    return fd
