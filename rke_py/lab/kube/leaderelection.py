"""Lease-based leader election, as client-go's leaderelection package does it with a Lease lock."""

import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from rke_py.lab.kube import log, objects
from rke_py.lab.kube.client import ApiError, KubeClient
from rke_py.lab.kube.resources import parse_time


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    name: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def identity() -> str:
    """``<hostname>_<uuid>``, the holder identity kube-controller-manager and kube-scheduler use."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElector:
    """Acquire the Lease, then renew it every retry period; losing it ends leadership for good."""

    def __init__(self, client: KubeClient, config: ElectionConfig, holder: str) -> None:
        self.client = client
        self.config = config
        self.holder = holder
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases/{config.name}"
        self.leading = threading.Event()

    def _try_acquire_or_renew(self) -> bool:
        now = objects.now_micro()
        try:
            lease = self.client.get(self.path)
        except ApiError as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                "spec": self._spec(now, now, 0),
            }
            self.client.create(self.path.rsplit("/", 1)[0], body)
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.holder:
            renewed = parse_time(spec.get("renewTime")) or 0.0
            if renewed + float(spec.get("leaseDurationSeconds") or 0) > time.time():
                return False
        if holder == self.holder:
            lease["spec"] = self._spec(
                spec.get("acquireTime") or now, now, int(spec.get("leaseTransitions") or 0)
            )
        else:
            transitions = int(spec.get("leaseTransitions") or 0) + (1 if holder else 0)
            lease["spec"] = self._spec(now, now, transitions)
        self.client.update(self.path, lease)
        return True

    def _spec(self, acquired: str, renewed: str, transitions: int) -> dict:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": int(self.config.lease_duration),
            "acquireTime": acquired,
            "renewTime": renewed,
            "leaseTransitions": transitions,
        }

    def _attempt(self) -> bool:
        try:
            return self._try_acquire_or_renew()
        except ApiError as exc:
            if exc.status != 409:
                log.error(f"error retrieving resource lock {self.config.namespace}/{self.config.name}: {exc}")
            return False

    def run(self, on_started_leading: Callable[[], None]) -> None:
        """Block until leadership is lost (then return), calling ``on_started_leading`` once acquired."""
        lock = f"{self.config.namespace}/{self.config.name}"
        log.info(f"attempting to acquire leader lease {lock}...")
        while not self._attempt():
            time.sleep(self.config.retry_period)
        log.info(f"successfully acquired lease {lock}")
        self.leading.set()
        threading.Thread(target=on_started_leading, name="leading", daemon=True).start()
        last_renew = time.monotonic()
        while True:
            time.sleep(self.config.retry_period)
            if self._attempt():
                last_renew = time.monotonic()
            elif time.monotonic() - last_renew > self.config.renew_deadline:
                log.error(f"failed to renew lease {lock}: timed out waiting for the condition")
                self.leading.clear()
                return
