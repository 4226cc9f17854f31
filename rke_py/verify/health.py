"""Health probes fetched from the node itself (over its SSH connection), as RKE does.

A probe passing on the node proves the component serves there, whatever the network between rke-py
and the node allows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

from rke_py.errors import BusyError
from rke_py.pki.certs import CertKeyPair
from rke_py.plan.model import HealthCheck

# Pauses between probes: the first short (most components answer within a second or two), each after it
# half again as long up to a second, for FAST_PERIOD; then the check's own interval. Every probe is an SSH
# channel and often a TLS handshake: a fixed half second cost twice the probes for a component that takes
# a while, and a busy host's components all take a while.
FIRST_POLL = 0.1
POLL_GROWTH = 1.5
POLL_CAP = 1.0
FAST_PERIOD = 30.0
# A component that answers but is not ready yet, or whose container runs and has never been restarted, is
# starting, not failing: on a slow host (a VM under software emulation) the apiserver's start-up hooks
# alone, and a kubelet's start, took longer than RKE's 50 s. It gets this many times the check's patience,
# or the run's patience with a busy host (--api-timeout) when that is longer: an emulated apiserver's
# bootstrap roles took past 200 s. One that neither answers nor runs unrestarted (it crashed) fails after
# the check's own.
STARTING_PATIENCE = 4


class Seen(NamedTuple):
    """One probe's outcome."""

    ok: bool
    detail: str
    answered: bool = True  # the server said something, if only that it is not ready
    busy: bool = False  # it took the connection and said nothing in time


def probe(conn, check: HealthCheck, bundle: Mapping[str, CertKeyPair]) -> Seen:
    """One attempt."""
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
        return Seen(False, f"{check.url}: {exc}", answered=False, busy=isinstance(exc, BusyError))
    text = body.decode(errors="replace").strip() if isinstance(body, bytes) else str(body).strip()
    if status != 200:
        # /readyz and /healthz list every check; the failing ones ("[-]...") say what is not ready.
        failing = [line for line in text.splitlines() if line.startswith("[-]")]
        return Seen(False, f"{check.url}: HTTP {status} {'; '.join(failing) if failing else text[:200]}")
    if check.expect_json:
        try:
            doc = json.loads(text)
        except ValueError:
            return Seen(False, f"{check.url}: not JSON: {text[:200]}")
        for key, want in check.expect_json:
            if str(doc.get(key)) != want:
                return Seen(False, f"{check.url}: {key}={doc.get(key)!r}, want {want!r}")
    return Seen(True, f"{check.url}: {text[:80] or 'ok'}")


def wait_healthy(
    conn,
    check: HealthCheck,
    bundle: Mapping[str, CertKeyPair],
    starting: Callable[[], bool] = lambda: False,
    busy_patience: float = 0,
) -> tuple[bool, str]:
    """Probe until healthy or the check's patience (retries times interval, RKE's numbers) runs out;
    STARTING_PATIENCE times that, or `busy_patience` seconds if longer, while the server answers or
    `starting()` says its container still starts.

    Most components answer within a second or two, so the first probes follow each other closely: every
    container started one after another on a host waits less.
    """
    started = time.monotonic()
    patience = check.retries * check.interval
    longest = max(STARTING_PATIENCE * patience, busy_patience)
    pause = FIRST_POLL
    while True:
        ok, detail, answered, _ = probe(conn, check, bundle)
        now = time.monotonic()
        if ok or now >= started + longest:
            return ok, detail
        if now >= started + patience and not answered and not starting():
            return ok, detail
        # one probe falls at the end of the check's own patience, where a server that never answered fails
        end = started + (patience if now < started + patience else longest)
        time.sleep(min(pause, end - now))
        pause = min(pause * POLL_GROWTH, POLL_CAP) if now - started < FAST_PERIOD else check.interval
