"""Bearer tokens checked by a webhook, as the real apiserver's --authentication-token-webhook-config-file:
a TokenReview (authentication.k8s.io/v1beta1, the default --authentication-token-webhook-version) sent to
the kubeconfig's server, each answer kept for --authentication-token-webhook-cache-ttl (2m by default)."""

import json
import ssl
import threading
import time
import urllib.request

from rke_py.lab.kube import kubeconfig, log


class TokenWebhook:
    def __init__(self, config_file: str, ttl: float) -> None:
        cluster, _ = kubeconfig.current(config_file)  # read now: the real apiserver fails to start without it
        self.server = str(cluster["server"])
        self.tls = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            self.tls.check_hostname = False
            self.tls.verify_mode = ssl.CERT_NONE
        self.ttl = ttl
        self._cache: dict[str, tuple[float, tuple[str, tuple[str, ...]] | None]] = {}
        self._lock = threading.Lock()

    def authenticate(self, token: str) -> tuple[str, tuple[str, ...]] | None:
        """(user name, groups) when the webhook accepts `token`; None when it refuses or cannot answer."""
        with self._lock:
            cached = self._cache.get(token)
        if cached and cached[0] > time.monotonic():
            return cached[1]
        review = {
            "apiVersion": "authentication.k8s.io/v1beta1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        request = urllib.request.Request(
            self.server,
            data=json.dumps(review).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=10, context=self.tls) as answer:
                status = json.load(answer).get("status") or {}
        except (OSError, ValueError) as exc:
            log.error(f"token webhook {self.server}: {exc}")
            return None  # not cached: the real authenticator retries a failed call
        user = status.get("user") or {}
        found = (
            (user.get("username", ""), tuple(user.get("groups") or ()))
            if status.get("authenticated")
            else None
        )
        with self._lock:
            self._cache[token] = (time.monotonic() + self.ttl, found)
        return found
