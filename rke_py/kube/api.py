"""A minimal Kubernetes API client for verify and cluster objects, using the admin certificate.

It talks to the same address the admin kubeconfig names, so what rke-py checks is what kubectl sees.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import tempfile
from collections.abc import Sequence
from typing import Any

from rke_py.pki.certs import CertKeyPair

FIELD_MANAGER = "rke-py"


class KubeAPIError(Exception):
    """An HTTP error answer (`status` set) or no apiserver answering (`status` 0)."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class KubeAPI:
    def __init__(self, servers: Sequence[str], ca: CertKeyPair, admin: CertKeyPair, timeout: float = 5):
        self.servers = list(servers)  # "host:port", tried in order
        self.timeout = timeout
        self._ctx = ssl.create_default_context(cadata=ca.leaf_pem)
        with tempfile.TemporaryDirectory() as tmp:  # 0700: the key is never readable by others
            cert, key = os.path.join(tmp, "c.pem"), os.path.join(tmp, "k.pem")
            for path, text in ((cert, admin.cert_pem), (key, admin.key_pem)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(text)
            self._ctx.load_cert_chain(cert, key)

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        """Send to the first server that answers; raise KubeAPIError on HTTP errors."""
        last: Exception | None = None
        for server in self.servers:
            host, _, port = server.rpartition(":")
            conn = http.client.HTTPSConnection(host, int(port), context=self._ctx, timeout=self.timeout)
            try:
                data = json.dumps(body).encode() if body is not None else None
                conn.request(method, path, body=data, headers={"Content-Type": content_type})
                resp = conn.getresponse()
                raw = resp.read()
            except OSError as exc:
                last = exc
                continue
            finally:
                conn.close()
            if resp.status >= 400:
                raise KubeAPIError(
                    f"{method} {path}: HTTP {resp.status}: {raw[:200].decode(errors='replace')}", resp.status
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
