"""Host keys: which servers rke-py trusts, and what it learnt this run.

RKE never checks host keys. rke-py does, the way OpenSSH's `StrictHostKeyChecking=accept-new` does: the
first key seen for `host:port` is pinned in the cluster state (`rkePy.hostKeys`), and a later different
key is refused, because a silently changed key is exactly what an attacker in the middle looks like.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

log = logging.getLogger(__name__)

STATE_KEY = "rkePy.hostKeys"


class HostKeyPolicy(StrEnum):
    ACCEPT_NEW = "accept-new"  # unknown host: accept and record; known host with another key: refuse
    STRICT = "strict"  # unknown host: refuse
    IGNORE = "ignore"  # accept anything, with a warning


class HostKeyRejected(Exception):
    """The server's host key is not acceptable; the message says what changed and what to do."""


@dataclass(frozen=True)
class KnownKey:
    keytype: str  # "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", ...
    b64: str
    source: str  # where it was pinned, for messages: "cluster state" or a known_hosts path

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.b64)

    def __str__(self) -> str:
        return f"{self.keytype} {self.fingerprint}"


def fingerprint(b64: str) -> str:
    """OpenSSH's `SHA256:...` fingerprint of a base64 key blob."""
    digest = hashlib.sha256(base64.b64decode(b64)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def host_id(host: str, port: int) -> str:
    """The state's key for a host: "host:port"."""
    return f"{host}:{port}"


def _known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


# Server host-key algorithms that produce each key type (RSA keys sign with rsa-sha2-* since OpenSSH 7.2).
_ALGORITHMS = {"ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")}


class HostKeyStore:
    """Known host keys from the cluster state and optionally a known_hosts file; collects new ones.

    `pinned` maps "host:port" to "<keytype> <base64>" (the state's `rkePy.hostKeys`); keys accepted under
    `accept-new` land in `learned` in the same format, for the caller to save. Thread-safe.
    """

    def __init__(self, pinned: Mapping[str, str] | None = None, known_hosts_file: str | None = None):
        self.pinned = dict(pinned or {})
        self.learned: dict[str, str] = {}
        self._known_hosts_file = known_hosts_file
        self._known_hosts: _KnownHosts | None = None
        self._lock = threading.Lock()

    def known(self, host: str, port: int) -> list[KnownKey]:
        """Every key trusted for host:port, the state's first."""
        with self._lock:
            keys: list[KnownKey] = []
            entry = self.pinned.get(host_id(host, port)) or self.learned.get(host_id(host, port))
            if entry:
                keys.append(_parse_entry(host_id(host, port), entry))
            if self._known_hosts_file:
                if self._known_hosts is None:
                    self._known_hosts = _KnownHosts.read(self._known_hosts_file)
                keys += self._known_hosts.lookup(_known_hosts_name(host, port))
            return keys

    def _known_algorithms(self, host: str, port: int) -> list[str]:
        return [a for key in self.known(host, port) for a in _ALGORITHMS.get(key.keytype, (key.keytype,))]

    def preferred_algorithms(self, host: str, port: int, available: tuple[str, ...]) -> tuple[str, ...]:
        """Host-key algorithms with the known types first, so the server shows the key we can check."""
        first = [a for a in self._known_algorithms(host, port) if a in available]
        return tuple(dict.fromkeys(first + list(available)))

    def checkable_with(self, host: str, port: int, available: tuple[str, ...]) -> bool:
        """No key is known for host:port, or one of a type a client offering `available` can be shown."""
        known = self._known_algorithms(host, port)
        return not known or any(a in available for a in known)

    def check(self, host: str, port: int, keytype: str, b64: str, policy: HostKeyPolicy) -> None:
        """Accept the key the server showed (its type and base64 blob) for host:port under `policy`, or
        raise HostKeyRejected saying why."""
        name = host_id(host, port)
        offered = KnownKey(keytype, b64, "server")
        known = self.known(host, port)
        if self._known_hosts is not None and offered.b64 in self._known_hosts.revoked:
            raise HostKeyRejected(
                f"host key {offered} of {name} is marked @revoked in {self._known_hosts_file}; refusing it"
            )
        if any(k.keytype == offered.keytype and k.b64 == offered.b64 for k in known):
            return
        if policy is HostKeyPolicy.IGNORE:
            what = "differs from the known key" if known else "is unknown"
            log.warning("%s: host key %s %s; accepted (--host-key-policy ignore)", name, offered, what)
            return
        if known:
            old = ", ".join(f"{k} (from {k.source})" for k in known)
            remove = " / ".join(_removal_hint(name, host, port, k.source) for k in known)
            raise HostKeyRejected(
                f"host key for {name} has changed: expected {old}, the server offered {offered}. "
                "Someone could be intercepting the connection, or the host was rebuilt. If it was rebuilt, "
                f"{remove}, or run once with --host-key-policy ignore"
            )
        if policy is HostKeyPolicy.STRICT:
            raise HostKeyRejected(
                f"host key for {name} is unknown ({offered}) and --host-key-policy is strict: add "
                f'"{name}": "{offered.keytype} <base64>" to {STATE_KEY} in the cluster state or the key to '
                "the --known-hosts file, or run with --host-key-policy accept-new"
            )
        with self._lock:
            self.learned[name] = f"{offered.keytype} {offered.b64}"
        log.info("%s: new host key %s recorded", name, offered)


def _removal_hint(name: str, host: str, port: int, source: str) -> str:
    if source == "cluster state":
        return f'remove "{name}" from {STATE_KEY} in the cluster state'
    return f"remove it from {source} (ssh-keygen -R '{_known_hosts_name(host, port)}' -f {source})"


def _parse_entry(name: str, entry: str) -> KnownKey:
    parts = entry.split()
    try:
        if len(parts) < 2:
            raise ValueError
        base64.b64decode(parts[1], validate=True)
    except (ValueError, binascii.Error):
        raise HostKeyRejected(
            f'{STATE_KEY} entry for {name} is not "<keytype> <base64>": fix or remove it in the cluster state'
        ) from None
    return KnownKey(parts[0], parts[1], "cluster state")


@dataclass
class _KnownHosts:
    """An OpenSSH known_hosts file, read once and indexed: each host is looked up once per connection
    attempt, and a file listing every node of a large cluster made a linear search with a key re-encoded
    per entry cost more than the SSH login itself.

    Names match exactly or by their hashed form (`|1|salt|hash`), as paramiko.HostKeys matches them; lines
    it cannot parse (`@cert-authority`, unknown key types) are skipped, since paramiko would stop at them.
    """

    path: str
    named: dict[str, list[KnownKey]]
    hashed: list[tuple[bytes, bytes, KnownKey]]  # (salt, HMAC-SHA1 of the name, key)
    revoked: set[str]  # base64 blobs marked @revoked
    found: dict[str, list[KnownKey]]  # lookups made, by name

    @classmethod
    def read(cls, path: str) -> _KnownHosts:
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise HostKeyRejected(f"cannot read known_hosts file {path}: {e.strerror}") from None
        table = cls(path, {}, [], set(), {})
        for lineno, raw in enumerate(lines, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("@revoked"):
                parts = line.split()
                if len(parts) >= 4:
                    table.revoked.add(parts[3])
                continue
            if line.startswith("@"):
                continue
            try:
                entry = HostKeyEntry.from_line(line, lineno)
            except (InvalidHostKey, paramiko.SSHException, ValueError) as e:
                log.debug("%s:%d: skipped (%s)", path, lineno, e)
                continue
            if entry is None:
                continue
            key = KnownKey(entry.key.get_name(), entry.key.get_base64(), path)
            for name in entry.hostnames:
                if name.startswith("|1|"):
                    salt, _, digest = name[3:].partition("|")
                    try:
                        table.hashed.append((base64.b64decode(salt), base64.b64decode(digest), key))
                    except binascii.Error:
                        log.debug("%s:%d: skipped a garbled hashed name", path, lineno)
                else:
                    table.named.setdefault(name, []).append(key)
        return table

    def lookup(self, name: str) -> list[KnownKey]:
        """The keys listed for `name` ("host" or "[host]:port"), in the file's order (called under the
        store's lock)."""
        if name not in self.found:
            hashed = [k for salt, digest, k in self.hashed if _hmac_matches(salt, name, digest)]
            self.found[name] = list(dict.fromkeys(self.named.get(name, []) + hashed))
        return self.found[name]


def _hmac_matches(salt: bytes, name: str, digest: bytes) -> bool:
    return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest)
