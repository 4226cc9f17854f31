"""Health probes fetched from the node itself (over its SSH connection), as RKE does.

A probe passing on the node proves the component serves there, whatever the network between rke-py
and the node allows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from rke_py.pki.certs import CertKeyPair
from rke_py.plan.model import HealthCheck


def probe(conn, check: HealthCheck, bundle: Mapping[str, CertKeyPair]) -> tuple[bool, str]:
    """One attempt: (healthy, what was seen)."""
    pair = bundle.get(check.client_cert) if check.client_cert else None
    try:
        if check.url.startswith("https://"):
            status, body = conn.https_get(
                check.url,
                cert_pem=pair.cert_pem.encode() if pair else None,
                key_pem=pair.key_pem.encode() if pair else None,
                timeout=5,
            )
        else:
            status, body = conn.http_get(check.url, timeout=5)
    except Exception as exc:  # any transport failure is "not healthy yet"
        return False, f"{check.url}: {exc}"
    text = body.decode(errors="replace").strip() if isinstance(body, bytes) else str(body).strip()
    if status != 200:
        return False, f"{check.url}: HTTP {status} {text[:200]}"
    if check.expect_json:
        try:
            doc = json.loads(text)
        except ValueError:
            return False, f"{check.url}: not JSON: {text[:200]}"
        for key, want in check.expect_json:
            if str(doc.get(key)) != want:
                return False, f"{check.url}: {key}={doc.get(key)!r}, want {want!r}"
    return True, f"{check.url}: {text[:80] or 'ok'}"


def wait_healthy(
    conn, check: HealthCheck, bundle: Mapping[str, CertKeyPair], *, retries: int | None = None
) -> tuple[bool, str]:
    """Probe until healthy or `retries` attempts (default: the check's own) have failed."""
    attempts = retries or check.retries
    detail = ""
    for attempt in range(attempts):
        ok, detail = probe(conn, check, bundle)
        if ok:
            return True, detail
        if attempt + 1 < attempts:  # most components answer within seconds: look often at first
            time.sleep(min(2.0, check.interval) if attempt < 5 else check.interval)
    return False, detail
