"""An etcd v3 client over etcd's JSON gRPC gateway (``/v3/kv/*``), standard library only.

The apiserver keeps every object in the real etcd, so resourceVersion is etcd's mod_revision and
compare-and-swap transactions make concurrent writers safe, as in Kubernetes.
"""

import base64
import http.client
import json
import ssl
import threading
import urllib.parse
from dataclasses import dataclass

_TIMEOUT = 5.0


class EtcdError(Exception):
    """No etcd server in --etcd-servers answered, or one refused the request."""


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int


def _b64(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return base64.b64encode(data).decode()


def prefix_end(prefix: str) -> str:
    """The range end that selects every key starting with ``prefix`` (etcd's ``--prefix``)."""
    raw = bytearray(prefix.encode())
    while raw and raw[-1] == 0xFF:
        raw.pop()
    raw[-1] += 1
    return raw.decode("latin-1")


def _kv(item: dict) -> KeyValue:
    return KeyValue(
        key=base64.b64decode(item["key"]).decode(),
        value=base64.b64decode(item.get("value", "")),
        create_revision=int(item.get("create_revision", 0)),
        mod_revision=int(item.get("mod_revision", 0)),
    )


class EtcdClient:
    """Talks to the first server of ``servers`` that answers, over TLS with a client certificate."""

    def __init__(
        self, servers: list[str], certfile: str | None, keyfile: str | None, cafile: str | None
    ) -> None:
        self._servers = [urllib.parse.urlsplit(s) for s in servers]
        self._context = ssl.create_default_context(cafile=cafile)
        if certfile:
            self._context.load_cert_chain(certfile, keyfile)
        self._local = threading.local()
        self._preferred = 0

    def _connection(self, index: int) -> http.client.HTTPConnection:
        pool = self._local.__dict__.setdefault("pool", {})
        if index not in pool:
            url = self._servers[index]
            if url.scheme == "https":
                pool[index] = http.client.HTTPSConnection(
                    url.hostname, url.port or 2379, timeout=_TIMEOUT, context=self._context
                )
            else:
                pool[index] = http.client.HTTPConnection(url.hostname, url.port or 2379, timeout=_TIMEOUT)
        return pool[index]

    def _call(self, path: str, body: dict) -> dict:
        errors = []
        count = len(self._servers)
        for step in range(count):
            index = (self._preferred + step) % count
            conn = self._connection(index)
            try:
                conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._local.pool.pop(index, None)
                errors.append(f"{self._servers[index].geturl()}: {exc}")
                continue
            if response.status != 200:
                raise EtcdError(f"etcd {path}: HTTP {response.status}: {data[:200]!r}")
            self._preferred = index
            return json.loads(data)
        raise EtcdError("no etcd server answered: " + "; ".join(errors))

    def get(self, key: str) -> KeyValue | None:
        kvs = self._call("/v3/kv/range", {"key": _b64(key)}).get("kvs", [])
        return _kv(kvs[0]) if kvs else None

    def list(self, prefix: str) -> tuple[list[KeyValue], int]:
        """Every key under ``prefix`` and the store revision they were read at."""
        reply = self._call("/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))})
        return [_kv(item) for item in reply.get("kvs", [])], int(reply["header"]["revision"])

    def revision(self) -> int:
        """The current store revision; also a cheap health probe."""
        reply = self._call("/v3/kv/range", {"key": _b64("\0"), "count_only": True})
        return int(reply["header"]["revision"])

    def _txn(self, compare: dict, key: str, value: bytes | None) -> int | None:
        if value is None:
            op = {"request_delete_range": {"key": _b64(key)}}
        else:
            op = {"request_put": {"key": _b64(key), "value": _b64(value)}}
        reply = self._call("/v3/kv/txn", {"compare": [compare], "success": [op]})
        if not reply.get("succeeded"):
            return None
        return int(reply["header"]["revision"])

    def create(self, key: str, value: bytes) -> int | None:
        """Put ``key`` only if it does not exist; the new revision, or None if it exists."""
        compare = {"key": _b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
        return self._txn(compare, key, value)

    def update(self, key: str, value: bytes, mod_revision: int) -> int | None:
        """Put ``key`` only if it was last written at ``mod_revision``; the new revision, or None."""
        compare = {"key": _b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(mod_revision)}
        return self._txn(compare, key, value)

    def delete(self, key: str, mod_revision: int) -> int | None:
        """Delete ``key`` only if it was last written at ``mod_revision``; the revision, or None."""
        compare = {"key": _b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(mod_revision)}
        return self._txn(compare, key, None)
