"""How long `up` waits for a component's health check, and what it says when the wait runs out."""

from __future__ import annotations

import pytest

from rke_py.plan.model import HealthCheck
from rke_py.verify import health

CHECK = HealthCheck(url="https://localhost:6443/readyz", retries=10, interval=5.0)  # RKE's 50 s
NOT_READY = (
    b"[+]ping ok\n[+]etcd ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n"
    b"[-]poststarthook/scheduling/bootstrap-system-priority-classes failed: reason withheld\n"
    b"readyz check failed"
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Node:
    """A component that refuses connections (or answers "not ready") until `ready_at`, never if None."""

    def __init__(self, clock: Clock, ready_at: float | None, refuse: bool = False) -> None:
        self.clock, self.ready_at, self.refuse = clock, ready_at, refuse
        self.probes = 0

    def https_get(self, url, cert_pem=None, key_pem=None, timeout=5):
        self.probes += 1
        if self.ready_at is not None and self.clock.now >= self.ready_at:
            return 200, b"ok"
        if self.refuse:
            raise ConnectionRefusedError("connection refused")
        return 500, NOT_READY


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(health.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(health.time, "sleep", fake.sleep)
    return fake


def test_a_server_that_answers_gets_longer_than_one_that_does_not(clock: Clock):
    # The apiserver on a slow host: it answers at once, its start-up hooks finish after 150 s.
    ok, detail = health.wait_healthy(Node(clock, ready_at=150), CHECK, {})
    assert ok, detail
    assert 150 <= clock.now < 160


def test_the_longer_wait_has_an_end(clock: Clock):
    ok, detail = health.wait_healthy(Node(clock, ready_at=None), CHECK, {})
    assert not ok
    assert clock.now == pytest.approx(health.STARTING_PATIENCE * 50)
    # What is not ready, not the first 200 characters of the list.
    assert detail == (
        "https://localhost:6443/readyz: HTTP 500 "
        "[-]poststarthook/rbac/bootstrap-roles failed: reason withheld; "
        "[-]poststarthook/scheduling/bootstrap-system-priority-classes failed: reason withheld"
    )


def test_a_run_patient_with_busy_hosts_gives_a_starting_server_as_long(clock: Clock):
    # An emulated apiserver whose bootstrap roles take 380 s, under `up --api-timeout 600`.
    ok, detail = health.wait_healthy(Node(clock, ready_at=380), CHECK, {}, busy_patience=600)
    assert ok, detail
    assert 380 <= clock.now < 390
    ok, _ = health.wait_healthy(Node(clock, ready_at=None), CHECK, {}, busy_patience=600)
    assert not ok
    assert clock.now == pytest.approx(380 + 600, abs=1)
    start = clock.now  # a crashed one still fails after RKE's 50 s
    ok, _ = health.wait_healthy(Node(clock, ready_at=None, refuse=True), CHECK, {}, busy_patience=600)
    assert not ok
    assert clock.now - start == pytest.approx(50)


def test_a_server_that_never_answers_and_is_not_starting_fails_after_rkes_patience(clock: Clock):
    # Its container crashed (or is gone): `starting` says no, as it does by default.
    ok, detail = health.wait_healthy(Node(clock, ready_at=None, refuse=True), CHECK, {})
    assert not ok
    assert clock.now == pytest.approx(50)
    assert detail == "https://localhost:6443/readyz: connection refused"


def test_a_container_that_runs_and_has_not_crashed_is_still_starting(clock: Clock):
    # A kubelet on a slow host: its port opens after 80 s; its container runs all along.
    node = Node(clock, ready_at=80, refuse=True)
    ok, detail = health.wait_healthy(node, CHECK, {}, starting=lambda: True)
    assert ok, detail
    assert 80 <= clock.now < 90


@pytest.mark.parametrize("ready_at", [0.3, 1.2, 2.5])
def test_a_component_that_starts_at_once_is_seen_at_once(clock: Clock, ready_at: float):
    ok, _ = health.wait_healthy(Node(clock, ready_at=ready_at, refuse=True), CHECK, {}, starting=lambda: True)
    assert ok
    assert clock.now - ready_at <= 0.5 * ready_at + 0.1


def test_one_that_takes_a_while_is_not_probed_twice_a_second(clock: Clock):
    # Each probe is an SSH channel and a TLS handshake on the host; a busy host's apiserver takes 25 s.
    node = Node(clock, ready_at=25)
    ok, _ = health.wait_healthy(node, CHECK, {})
    assert ok
    assert 25 <= clock.now <= 26
    assert node.probes <= 30
