"""A minimal Kubernetes API client for verify and cluster objects, using the admin certificate.

Every request rides an SSH channel that a controlplane node opens to its own apiserver address (`dial`),
through the bastion when there is one, as RKE's API calls do: a machine that reaches the nodes only over
SSH can build and check the cluster. The address is the one the admin kubeconfig names, so the server
certificate is checked against the same name kubectl checks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import paramiko

from rke_py.errors import RkePyError
from rke_py.hosts import channels
from rke_py.pki.certs import CertKeyPair

FIELD_MANAGER = "rke-py"

# (host, port) -> a byte stream to it, opened by a node; raises RkePyError or an SSH/OS error when it cannot.
Dial = Callable[[str, int], paramiko.Channel]


class KubeAPIError(Exception):
    """An HTTP error answer (`status` set) or no apiserver answering (`status` 0)."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class KubeAPI:
    def __init__(
        self, servers: Sequence[str], ca: CertKeyPair, admin: CertKeyPair, dial: Dial, timeout: float = 5
    ):
        self.servers = list(servers)  # "host:port" (IPv6 bracketed), tried in order
        self.dial = dial
        self.timeout = timeout
        self._ctx = channels.tls_context(
            ca.leaf_pem.encode(), admin.cert_pem.encode(), admin.key_pem.encode()
        )

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        """Send to the first server that answers; raise KubeAPIError on HTTP errors."""
        last: Exception | None = None
        data = json.dumps(body).encode() if body is not None else None
        for server in self.servers:
            host, _, port = server.rpartition(":")
            host = host.strip("[]")
            try:
                status, raw = channels.http_request(
                    self.dial(host, int(port)),
                    host,
                    int(port),
                    path,
                    context=self._ctx,
                    timeout=self.timeout,
                    method=method,
                    body=data,
                    headers={"Content-Type": content_type},
                )
            except (OSError, RkePyError, paramiko.SSHException, channels.HTTPProblem) as exc:
                last = exc
                continue
            if status >= 400:
                raise KubeAPIError(
                    f"{method} {path}: HTTP {status}: {raw[:200].decode(errors='replace')}", status
                )
            return json.loads(raw) if raw else None
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
