"""A minimal Kubernetes API client for verify and cluster objects, using the admin certificate.

Every request rides an SSH channel that a controlplane node opens to its own apiserver address (`dial`),
through the bastion when there is one, as RKE's API calls do: a machine that reaches the nodes only over
SSH can build and check the cluster. The address is the one the admin kubeconfig names, so the server
certificate is checked against the same name kubectl checks. A channel stays open for the next request
to the same apiserver (up to KEPT_PER_SERVER of them): a request then costs no channel and no handshake.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

import paramiko

from rke_py.errors import RkePyError
from rke_py.hosts import channels
from rke_py.pki.certs import CertKeyPair

FIELD_MANAGER = "rke-py"
log = logging.getLogger(__name__)

# (host, port) -> a byte stream to it, opened by a node; raises RkePyError or an SSH/OS error when it cannot.
Dial = Callable[[str, int], channels.Channel]


def node_ready(node: dict[str, Any]) -> bool:
    """Whether a Node object's Ready condition is True."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class KubeAPIError(Exception):
    """An HTTP error answer (`status` set) or no apiserver answering (`status` 0)."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


def busy(status: int, reason: str) -> bool:
    """Whether an HTTP error answer says "ask again later" rather than "no": an apiserver that sheds load,
    or whose etcd did not answer it in time."""
    return status in BUSY_STATUSES or (status == 500 and ("etcdserver" in reason or "timed out" in reason))


class _Busy(Exception):
    """Every apiserver reached was too busy to answer (the last one's words)."""


def _reason(raw: bytes, limit: int = 1000) -> str:
    """The message of a Kubernetes Status answer, or the start of whatever else came back."""
    try:
        message = json.loads(raw).get("message")
    except (ValueError, AttributeError):
        message = None
    text = message if isinstance(message, str) else raw.decode(errors="replace")
    return text[:limit]


# Seconds for one request: an apiserver that accepts the connection is alive, and a busy one on a slow host
# (a VM under software emulation) took longer than 5 s to answer; one that is down refuses at once.
REQUEST_TIMEOUT = 30.0
# A busy apiserver (an etcd on a slow disk, a small or emulated host) answers late, or says it is busy; RKE
# retries its calls for minutes. A call is asked again, after BACKOFF's pauses (the last one repeated),
# for up to this many seconds (--api-timeout); only then does the run fail. An apiserver that refuses, or a
# node not reached, is down rather than busy: that fails at once, as callers asking "does it run yet" need.
API_PATIENCE = 180.0
BACKOFF = (1.0, 2.0, 4.0, 8.0, 15.0)
# Connections kept open to each apiserver between requests: as many as requests go at once in a run (a
# verify round's and the apply threads'), beyond which a connection is closed after its answer.
KEPT_PER_SERVER = 8
BUSY_STATUSES = frozenset({429, 502, 503, 504})  # too many requests, and the gateway and timeout answers


class KubeAPI:
    def __init__(
        self,
        servers: Sequence[str],
        ca: CertKeyPair,
        admin: CertKeyPair,
        dial: Dial,
        timeout: float = REQUEST_TIMEOUT,
        patience: float = API_PATIENCE,
    ):
        self.servers = list(servers)  # "host:port" (IPv6 bracketed), tried in order
        self.dial = dial
        self.timeout = timeout
        self.patience = patience
        self._ctx = channels.tls_context(
            ca.leaf_pem.encode(), admin.cert_pem.encode(), admin.key_pem.encode()
        )
        # apiVersion -> kind -> (plural, namespaced), from discovery
        self._resources: dict[str, dict[str, tuple[str, bool]]] = {}
        self._lock = threading.Lock()
        self._idle: dict[str, list[channels.HTTPConnection]] = {}  # server -> connections kept open

    def _exchange(
        self, server: str, host: str, port: int, method: str, path: str, data: bytes | None, content_type: str
    ) -> tuple[int, bytes]:
        """One request on a connection kept open to `server` if one is idle, else (or if the server had
        closed it meanwhile) on a new one."""
        headers = {"Content-Type": content_type}
        with self._lock:
            idle = self._idle.get(server)
            kept = idle.pop() if idle else None
        if kept is not None:
            try:
                return self._ask(server, kept, method, path, data, headers)
            except channels.Stale:
                pass  # the server let it go: a new connection asks again
        conn = channels.HTTPConnection(self.dial(host, port), host, port, self._ctx, self.timeout)
        return self._ask(server, conn, method, path, data, headers)

    def _ask(
        self,
        server: str,
        conn: channels.HTTPConnection,
        method: str,
        path: str,
        data: bytes | None,
        headers: dict[str, str],
    ) -> tuple[int, bytes]:
        """The answer on `conn`, which is kept for the next request when the server allows, else closed."""
        try:
            answer = conn.request(method, path, timeout=self.timeout, body=data, headers=headers, keep=True)
        except BaseException:
            conn.close()
            raise
        with self._lock:
            kept = self._idle.setdefault(server, [])
            if conn.reusable and len(kept) < KEPT_PER_SERVER:
                kept.append(conn)
                return answer
        conn.close()
        return answer

    def close(self) -> None:
        """Close the kept connections."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        """Send to the first server that answers; while those reached are busy, ask again with backoff for
        up to `patience` seconds. Raise KubeAPIError on other HTTP errors, and when none answered."""
        call = f"{method} {path.split('?')[0]}"
        data = json.dumps(body).encode() if body is not None else None
        started, attempt = time.monotonic(), 0
        while True:
            try:
                return self._once(call, method, path, data, content_type)
            except _Busy as exc:
                pause, attempt = BACKOFF[min(attempt, len(BACKOFF) - 1)], attempt + 1
                spent = time.monotonic() - started
                if spent + pause >= self.patience:
                    raise KubeAPIError(
                        f"{call}: no apiserver answered ({', '.join(self.servers)}); asked {attempt} times "
                        f"in {spent:.0f} s: {exc}"
                    ) from None
                log.info("%s: the apiserver is busy (%s); asking again in %g s", call, exc, pause)
                time.sleep(pause)

    def _once(self, call: str, method: str, path: str, data: bytes | None, content_type: str) -> Any:
        """One round over the servers; _Busy (with what the last busy one said) when every one reached was
        busy."""
        last, busy_said = "", ""
        for server in self.servers:
            host, _, port = server.rpartition(":")
            host = host.strip("[]")
            try:
                status, raw = self._exchange(server, host, int(port), method, path, data, content_type)
            except channels.NoAnswer as exc:
                busy_said = f"{server}: {exc}"
                continue
            except (OSError, RkePyError, paramiko.SSHException, channels.HTTPProblem) as exc:
                last = str(exc) or type(exc).__name__
                continue
            if status >= 400:
                reason = _reason(raw)
                if busy(status, reason):
                    busy_said = f"{server}: HTTP {status}: {reason}"
                    continue
                raise KubeAPIError(f"{call}: HTTP {status}: {reason}", status)
            return json.loads(raw) if raw else None
        if busy_said:
            raise _Busy(busy_said)
        raise KubeAPIError(f"no apiserver answered ({', '.join(self.servers)}): {last}")

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def merge_patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, body, "application/merge-patch+json")

    def find(self, path: str) -> Any:
        """The object at `path`, or None when the API says it does not exist."""
        try:
            return self.get(path)
        except KubeAPIError as exc:
            if exc.status == 404:
                return None
            raise

    def apply(self, path: str, obj: Any) -> Any:
        """Server-side apply under rke-py's field manager, taking over fields others set (JSON is YAML)."""
        return self.request(
            "PATCH", f"{path}?fieldManager={FIELD_MANAGER}&force=true", obj, "application/apply-patch+yaml"
        )

    def resource(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        """(plural, namespaced) of `kind` as the API's discovery says, or None when it does not serve it
        (yet: a CRD just applied takes a moment). Known kinds are remembered, unknown ones asked again."""
        with self._lock:
            known = self._resources.get(api_version, {})
        if kind not in known:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            listing = self.find(base) or {}
            known = {
                r["kind"]: (r["name"], bool(r.get("namespaced")))
                for r in listing.get("resources", [])
                if "/" not in r.get("name", "")
            }
            with self._lock:
                self._resources[api_version] = known
        return known.get(kind)

    def path(self, api_version: str, kind: str, name: str = "", namespace: str = "") -> str:
        """The URL path of an object (or, without a name, of the collection); KubeAPIError 404 when the API
        does not serve the kind. A namespaced object without a namespace lives in `default` (as kubectl's)."""
        found = self.resource(api_version, kind)
        if found is None:
            raise KubeAPIError(f"the API serves no {kind} in {api_version}", 404)
        plural, namespaced = found
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        where = f"/namespaces/{namespace or 'default'}" if namespaced and (name or namespace) else ""
        return f"{base}{where}/{plural}" + (f"/{name}" if name else "")

    def object_path(self, obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return self.path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace", ""))

    def list(self, api_version: str, kind: str, label_selector: str = "") -> list[dict[str, Any]]:
        """Every object of `kind` in every namespace matching `label_selector`; [] when not served."""
        try:
            path = self.path(api_version, kind)
        except KubeAPIError:
            return []
        query = f"?labelSelector={urllib.parse.quote(label_selector)}" if label_selector else ""
        items = (self.get(path + query) or {}).get("items", [])
        for item in items:  # a list's items carry no apiVersion and kind
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def delete(self, path: str, propagation: str = "Background") -> None:
        """Delete with the dependents (a Job's pods, a DaemonSet's pods) in the background, or first with
        `Foreground`; gone is fine."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        try:
            self.request("DELETE", path, body)
        except KubeAPIError as exc:
            if exc.status != 404:
                raise

    def delete_and_wait(self, path: str, timeout: float, propagation: str = "Background") -> None:
        """Delete, then wait until the object is gone (its finalizers done, and with `Foreground` its
        dependents), so it can be created anew."""
        self.delete(path, propagation)
        deadline = time.monotonic() + timeout
        while self.find(path) is not None:
            if time.monotonic() > deadline:
                raise KubeAPIError(f"{path} was still there {timeout:.0f}s after it was deleted")
            time.sleep(0.5)
