"""RKE's snapshot archive: `<name>.zip` holding `/backup/<name>` (the etcd snapshot) and, when the state
was known, `/etc/kubernetes/<name>.rkestate` (the full cluster state), so a restore needs nothing else.

Pure: names, the archive, and the integrity check that runs before anything is stopped.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime

from rke_py.config import values
from rke_py.errors import UsageError

SUFFIX = ".zip"
SNAPSHOT_ENTRY = "/backup/{name}"  # the paths rke-tools writes, leading slash included
STATE_ENTRY = "/etc/kubernetes/{name}.rkestate"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # zip's earliest time: the same bytes for the same snapshot and state
_SHA256 = 32


class SnapshotError(UsageError):
    """A snapshot that is missing, unreadable or damaged: refused before anything is changed."""


@dataclass(frozen=True)
class Snapshot:
    name: str
    db: bytes  # what `etcdctl snapshot save` wrote: the bbolt file and its sha256
    state: str | None  # cluster.rkestate's JSON text, if the archive holds it


def check_name(name: str) -> str:
    """The name as RKE's CLI takes it: without `.zip` (RKE's restore failed on it; rke-py drops it)."""
    if name.endswith(SUFFIX):
        name = name[: -len(SUFFIX)]
    problem = values.snapshot_name(name)
    if problem:
        raise SnapshotError(f'snapshot name "{name}" {problem}')
    return name


def default_name(now: datetime | None = None, safe: bool = False) -> str:
    """RKE's name for a snapshot saved without --name; with `safe` (backup_config.safe_timestamp) the time
    has no colons (`2026-11-25T06-25-01Z`), a name every filesystem and S3 tool takes as it is."""
    moment = (now or datetime.now(UTC)).replace(microsecond=0)
    stamp = moment.isoformat().replace("+00:00", "Z")
    return f"rke_etcd_snapshot_{stamp.replace(':', '-') if safe else stamp}"


def check_db(db: bytes, where: str) -> None:
    """etcd's own integrity check: a saved snapshot ends with the sha256 of everything before it."""
    if len(db) <= _SHA256 or len(db) % 512 != _SHA256:
        raise SnapshotError(f"{where}: not an etcd snapshot ({len(db)} bytes, no integrity hash at its end)")
    if hashlib.sha256(db[:-_SHA256]).digest() != db[-_SHA256:]:
        raise SnapshotError(f"{where}: damaged: its content does not match the sha256 it was saved with")


def pack(snapshot: Snapshot) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        entries = [(SNAPSHOT_ENTRY, snapshot.db)]
        if snapshot.state is not None:
            entries.append((STATE_ENTRY, snapshot.state.encode()))
        for entry, data in entries:
            info = zipfile.ZipInfo(entry.format(name=snapshot.name), _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o600 << 16
            archive.writestr(info, data)
    return out.getvalue()


def unpack(name: str, data: bytes, where: str) -> Snapshot:
    """The snapshot and state in `data`, checked: a damaged zip or snapshot is a SnapshotError. Entries
    are found by their base name, so archives written without rke-tools' leading slash read too."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            bad = archive.testzip()
            if bad is not None:
                raise SnapshotError(f"{where}: damaged: {bad} does not match its checksum")
            found = {info.filename.rsplit("/", 1)[-1]: info for info in archive.infolist()}
            if name not in found:
                raise SnapshotError(f"{where}: the archive holds no snapshot named {name}")
            db = archive.read(found[name])
            state_entry = found.get(f"{name}.rkestate")
            state = archive.read(state_entry).decode() if state_entry else None
    except (zipfile.BadZipFile, zlib.error, EOFError, UnicodeDecodeError, OSError) as exc:
        raise SnapshotError(f"{where}: not a readable snapshot archive ({exc})") from exc
    check_db(db, where)
    return Snapshot(name, db, state)
