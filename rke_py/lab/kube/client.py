"""A small HTTPS client for the apiserver, configured from a kubeconfig with a client certificate."""

import base64
import contextlib
import http.client
import json
import os
import ssl
import tempfile
import threading
import urllib.parse

from rke_py.lab.kube import kubeconfig

_TIMEOUT = 10.0


class ApiError(Exception):
    """The apiserver answered with an error Status, or could not be reached (status 0)."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason


def _file_or_data(entry: dict, name: str, directory: str) -> str | None:
    """The path of ``name``, writing ``name-data`` to a private file when given inline."""
    if entry.get(f"{name}-data"):
        path = os.path.join(directory, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(base64.b64decode(entry[f"{name}-data"]))
        return path
    return entry.get(name)


def serving_context(kubeconfig_path: str, certfile: str | None, keyfile: str | None) -> ssl.SSLContext:
    """A server TLS context from --tls-cert-file/--tls-private-key-file.

    Without them the real components generate a self-signed certificate; the lab cannot (no
    certificate library in the image), so it serves with the kubeconfig's client certificate instead.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if certfile and keyfile:
        context.load_cert_chain(certfile, keyfile)
        return context
    _, user = kubeconfig.current(kubeconfig_path)
    with tempfile.TemporaryDirectory() as directory:
        cert = _file_or_data(user, "client-certificate", directory)
        key = _file_or_data(user, "client-key", directory)
        if not cert or not key:
            raise kubeconfig.KubeconfigError(f"{kubeconfig_path}: user has no client certificate and key")
        context.load_cert_chain(cert, key)
    return context


def context_from_kubeconfig(path: str) -> tuple[str, ssl.SSLContext]:
    """(server URL, client TLS context) for the current context of a kubeconfig."""
    cluster, user = kubeconfig.current(path)
    with tempfile.TemporaryDirectory() as directory:
        if cluster.get("insecure-skip-tls-verify"):
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = ssl.create_default_context(
                cafile=_file_or_data(cluster, "certificate-authority", directory)
            )
        cert = _file_or_data(user, "client-certificate", directory)
        key = _file_or_data(user, "client-key", directory)
        if cert:
            context.load_cert_chain(cert, key)
    return cluster["server"], context


class KubeClient:
    """JSON requests to one apiserver; one keep-alive connection per thread."""

    def __init__(self, kubeconfig_path: str, user_agent: str = "rke-py-lab") -> None:
        server, self._context = context_from_kubeconfig(kubeconfig_path)
        self._user_agent = user_agent
        url = urllib.parse.urlsplit(server)
        self._host, self._port = url.hostname, url.port or 443
        self._base = url.path.rstrip("/")
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(
                self._host, self._port, timeout=_TIMEOUT, context=self._context
            )
            self._local.conn = conn
        return conn

    def request(
        self, method: str, path: str, body: object = None, content_type: str = "application/json"
    ) -> dict:
        """The decoded JSON answer; ApiError for any non-2xx answer or a connection failure."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json", "User-Agent": self._user_agent}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.request(method, self._base + path, data, headers)
                response = conn.getresponse()
                payload = response.read()
                break
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._local.conn = None
                # A keep-alive connection the server closed fails once; a second failure is real.
                if attempt == 2 or not isinstance(exc, http.client.RemoteDisconnected | BrokenPipeError):
                    raise ApiError(0, f"{method} https://{self._host}:{self._port}{path}: {exc}") from exc
        decoded = None
        with contextlib.suppress(ValueError):
            decoded = json.loads(payload) if payload else {}
        if response.status >= 300:
            if isinstance(decoded, dict) and decoded.get("kind") == "Status":
                raise ApiError(response.status, decoded.get("message", ""), decoded.get("reason", ""))
            raise ApiError(response.status, payload[:200].decode(errors="replace"))
        return decoded

    def get(self, path: str) -> dict:
        return self.request("GET", path)

    def create(self, path: str, body: dict) -> dict:
        return self.request("POST", path, body)

    def update(self, path: str, body: dict) -> dict:
        return self.request("PUT", path, body)

    def merge_patch(self, path: str, body: dict) -> dict:
        return self.request("PATCH", path, body, "application/merge-patch+json")
