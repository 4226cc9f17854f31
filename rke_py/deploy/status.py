"""`status` and `cert list`: what a running cluster answers, changing nothing; unreachable hosts are
findings."""

from __future__ import annotations

import datetime as dt
import logging
import time

from rke_py.deploy.apply import Target
from rke_py.deploy.desired import Desired
from rke_py.deploy.parallel import for_each
from rke_py.deploy.phases import Phase, run_phases
from rke_py.deploy.session import Connector, Options, Session
from rke_py.errors import ConnectError
from rke_py.kube.api import KubeAPIError
from rke_py.pki import expiry
from rke_py.verify.checks import CLUSTER_CHECKS, Check, Report

log = logging.getLogger("rke_py.deploy")
BUSY_PAUSE = 1.0  # seconds between rounds for checks that got no answer (each already waited 5 s)
# Seconds a leader lease may take to be renewed once a stalled apiserver answers again: a lease's term
# (Kubernetes' default), where its holder retries every 2 s.
LEASE_GRACE = 15.0


class ConnectWhatAnswers(Phase):
    key, title, reads = "connect", "connecting to every host", True

    def __init__(self, session: Session):
        self.session = session

    def run(self) -> None:
        self.session.connect(tolerate=True)


class Verify(Phase):
    key, title, reads = "verify", "verifying the cluster", True

    def __init__(self, session: Session):
        self.session = session
        self.report = Report()

    def run(self) -> None:
        """The checks once; those a busy server gave no answer to in time asked again, each time logged,
        while the Kubernetes API answers and --api-timeout allows: a slow host's apiserver stalls for
        seconds at a time, and that is not a failure. Nor is a leader lease its holder could not renew
        while its apiserver stalled: once no check is busy, such leases get LEASE_GRACE to be renewed. A
        refusal or a wrong answer is reported at once, and so is every check of a cluster whose API answers
        nothing (its certificates expired, say)."""
        deadline = time.monotonic() + self.session.options.api_timeout
        report = self.session.verify()
        renewing_until = 0.0  # after a stall, until when stale leases are waited for
        while _api_answers(report) and time.monotonic() < deadline:
            stale = any(c.name == "lease" and not c.ok for c in report.checks)
            if busy := [c for c in report.checks if c.busy]:
                renewing_until = time.monotonic() + LEASE_GRACE
                named = "; ".join(f"{c.name} {c.target}" for c in busy)
                log.info("no answer in time from %s; asking again", named)
            elif stale and time.monotonic() < renewing_until:
                log.info("leader leases not renewed while the apiserver stalled; asking again")
            else:
                break
            time.sleep(BUSY_PAUSE)
            report = self.session.verify(again=report)
        self.report = report


def _api_answers(report: Report) -> bool:
    """Whether any row read from the Kubernetes API passed: the cluster serves, if slowly."""
    return any(c.ok for c in report.checks if c.name in CLUSTER_CHECKS)


class Certificates(Phase):
    """Every certificate of the state, and the one each reachable kubelet serves."""

    key, title, reads = "certificates", "reading the certificates the kubelets serve", True

    def __init__(self, session: Session):
        self.session = session
        self.expiries = expiry.of_bundle(session.desired.bundle)

    def run(self) -> None:
        def served(target: Target) -> expiry.Expiry:
            der = target.host.served_certificate(expiry.KUBELET_PORT)
            return expiry.served_by_kubelet(target.address, der)

        found, errors = for_each(self.session.targets.values(), served, self.session.options.concurrency)
        for error in errors:  # a kubelet that does not run: verify says so
            log.warning("%s: %s", error.host, error.detail)
        self.expiries += [e for _, e in found]


def certificates(
    desired: Desired, options: Options, connector: Connector | None = None
) -> list[expiry.Expiry]:
    with Session(desired, options, connector) as session:
        found = Certificates(session)
        run_phases([ConnectWhatAnswers(session), found])
        return found.expiries


def status(desired: Desired, options: Options, connector: Connector | None = None) -> Report:
    """The verify report, with a failed check for each expired certificate and a warning for each that
    expires within a month."""
    with Session(desired, options, connector) as session:
        check, found = Verify(session), Certificates(session)
        run_phases([ConnectWhatAnswers(session), check, found])
    now = dt.datetime.now(dt.UTC)
    generated = desired.config.services.kubelet.generate_serving_certificate
    expired, soon = expiry.ending(found.expiries, now)
    for e in soon:
        log.warning(expiry.warning(e, now, generated))
    check.report.checks += [
        Check("certificate", f"{e.name} ({e.where})", False, expiry.warning(e, now, generated))
        for e in expired
    ]
    return check.report


def server_version(desired: Desired, options: Options, connector: Connector | None = None) -> str:
    """The Kubernetes version the cluster's apiservers report (RKE's `rke version`), asked over the SSH
    connection of a controlplane node like every API call."""
    with Session(desired, options, connector) as session:
        try:
            return str(session.kube_api().get("/version")["gitVersion"])
        except (KubeAPIError, KeyError, TypeError) as exc:
            first = desired.config.hosts("controlplane")[0].address
            raise ConnectError(first, "kube-apiserver /version", str(exc) or "no version given") from exc
