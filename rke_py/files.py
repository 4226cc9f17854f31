"""Writing local files that hold secrets: atomically, and never readable by others, not even for a moment."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


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
