"""Root filesystems for lab images, assembled from this machine's own files.

Nothing can be pulled here, so every lab image is a busybox root plus binaries copied from the machine
with the shared libraries `ldd` names. A `Rootfs` is a manifest first (destination path -> what goes
there), so its content hash can be computed without writing anything: an image is only built when that
hash is new. The layout is merged-/usr like Debian's (`/bin`, `/sbin`, `/lib`, `/lib64` link into /usr),
so paths `ldd` reports resolve the same way inside the image.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import PurePosixPath
from typing import BinaryIO

BUSYBOX = "/usr/bin/busybox"
MERGED_USR = {"/bin": "usr/bin", "/sbin": "usr/sbin", "/lib": "usr/lib", "/lib64": "usr/lib64"}
_FIXED_MTIME = 1_700_000_000  # generated files get one constant mtime so the tar does not vary run to run
_LDD_PATH = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x[0-9a-f]+\)")


@dataclass(frozen=True)
class Entry:
    kind: str  # "file", "dir" or "link"
    mode: int = 0o755
    source: str | None = None  # a file on this machine, for kind "file"
    data: bytes | None = None  # generated content, for kind "file"
    target: str | None = None  # for kind "link"


@cache
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_sha256(path: str) -> str:
    """Content hash of a file, computed once per process per (path, size, mtime)."""
    st = os.stat(path)
    return _file_sha256(path, st.st_size, st.st_mtime_ns)


@cache
def shared_libraries(path: str) -> tuple[str, ...]:
    """The shared libraries (and the dynamic loader) `ldd` says `path` needs; empty for static files."""
    result = subprocess.run(["ldd", path], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return ()
    return tuple(m.group(1) for m in _LDD_PATH.finditer(result.stdout))


def canonical(path: str) -> str:
    """`path` with its directory resolved (merged /usr), keeping the file name the loader asks for."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


class Rootfs:
    """A root filesystem described as a manifest; `digest()` hashes it, `write_tar()` materialises it."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        for link, target in MERGED_USR.items():
            self.symlink(link, target)
        for d in ("/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/etc", "/root", "/tmp", "/var", "/run"):
            self.dir(d, 0o1777 if d == "/tmp" else 0o700 if d == "/root" else 0o755)
        self.symlink("/var/run", "../run")

    def _dest(self, dest: str) -> str:
        """Normalise `dest` and map the merged-/usr top directories onto /usr."""
        path = str(PurePosixPath("/") / dest)
        for link, target in MERGED_USR.items():
            if path == link or path.startswith(link + "/"):
                return "/" + target + path[len(link) :]
        return path

    def _put(self, dest: str, entry: Entry) -> None:
        parent = PurePosixPath(dest).parent
        while str(parent) != "/" and str(parent) not in self._entries:
            self._entries[str(parent)] = Entry("dir", 0o755)
            parent = parent.parent
        self._entries[dest] = entry

    def has(self, dest: str) -> bool:
        return self._dest(dest) in self._entries

    def dir(self, dest: str, mode: int = 0o755) -> None:
        self._put(self._dest(dest), Entry("dir", mode))

    def symlink(self, dest: str, target: str) -> None:
        path = str(PurePosixPath("/") / dest)  # the merged-/usr links themselves are not remapped
        self._put(path if path in MERGED_USR else self._dest(path), Entry("link", 0o777, target=target))

    def file(
        self, dest: str, *, source: str | None = None, data: bytes | str | None = None, mode: int = 0o644
    ):
        """Add one file, copied from `source` or holding `data`."""
        if isinstance(data, str):
            data = data.encode()
        if source is not None:
            source = os.path.realpath(source)
        self._put(self._dest(dest), Entry("file", mode, source=source, data=data))

    def binary(self, source: str, dest: str | None = None) -> None:
        """Add an executable and every shared library it loads, at the paths the loader looks for."""
        self.file(dest or canonical(source), source=source, mode=0o755)
        self.libraries(source)

    def libraries(self, source: str) -> None:
        for lib in shared_libraries(os.path.realpath(source)):
            if not self.has(canonical(lib)):
                self.file(canonical(lib), source=lib, mode=0o755)

    def tree(self, source: str, dest: str, skip: Callable[[str], bool] = lambda rel: False) -> None:
        """Copy a directory; `skip(relative path)` prunes files and whole directories."""
        for root, dirs, files in os.walk(source):
            rel_root = os.path.relpath(root, source)
            dirs[:] = sorted(d for d in dirs if not skip(os.path.normpath(os.path.join(rel_root, d))))
            for d in [d for d in dirs if os.path.islink(os.path.join(root, d))]:
                dirs.remove(d)
                self.symlink(os.path.join(dest, rel_root, d), os.readlink(os.path.join(root, d)))
            self.dir(os.path.normpath(os.path.join(dest, rel_root)))
            for name in sorted(files):
                rel = os.path.normpath(os.path.join(rel_root, name))
                if skip(rel):
                    continue
                path = os.path.join(root, name)
                target = os.path.join(dest, rel)
                if os.path.islink(path) and not os.path.isabs(os.readlink(path)):
                    self.symlink(target, os.readlink(path))
                else:
                    self.file(target, source=path, mode=os.stat(path).st_mode & 0o777)

    def busybox(self) -> None:
        """busybox-static with a link per applet; real binaries added before or after keep their place."""
        self.file("/usr/bin/busybox", source=BUSYBOX, mode=0o755)
        applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True, check=True).stdout
        for applet in applets.split():
            if not self.has(f"/usr/bin/{applet}") and not self.has(f"/usr/sbin/{applet}"):
                self.symlink(f"/usr/bin/{applet}", "busybox")

    def digest(self, *extra: str) -> str:
        """sha256 over every path, mode, link target and file content, plus `extra` (recipe details)."""
        h = hashlib.sha256()
        for item in extra:
            h.update(f"extra {item}\n".encode())
        for path, e in sorted(self._entries.items()):
            if e.kind == "file":
                content = file_sha256(e.source) if e.source else hashlib.sha256(e.data or b"").hexdigest()
            else:
                content = e.target or ""
            h.update(f"{e.kind} {path} {e.mode:o} {content}\n".encode())
        return h.hexdigest()

    def write_tar(self, out: BinaryIO) -> None:
        """Write the root filesystem as an uncompressed tar, everything owned by root."""
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for path, e in sorted(self._entries.items()):
                info = tarfile.TarInfo("." + path)
                info.mode, info.uid, info.gid, info.mtime = e.mode, 0, 0, _FIXED_MTIME
                if e.kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif e.kind == "link":
                    info.type, info.linkname = tarfile.SYMTYPE, e.target or ""
                    tar.addfile(info)
                elif e.source:
                    st = os.stat(e.source)
                    info.size, info.mtime = st.st_size, int(st.st_mtime)
                    with open(e.source, "rb") as f:
                        tar.addfile(info, f)
                else:
                    data = e.data or b""
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
