"""`status`: the verify report of a running cluster, changing nothing; unreachable hosts are findings."""

from __future__ import annotations

from rke_py.deploy.desired import Desired
from rke_py.deploy.phases import Phase, run_phases
from rke_py.deploy.session import Connector, Options, Session
from rke_py.verify.checks import Report


class ConnectWhatAnswers(Phase):
    key, title, reads = "connect", "connecting to every host", True

    def __init__(self, session: Session):
        self.session = session

    def run(self) -> None:
        self.session.connect(tolerate=True)


class Check(Phase):
    key, title, reads = "verify", "verifying the cluster", True

    def __init__(self, session: Session):
        self.session = session
        self.report = Report()

    def run(self) -> None:
        self.report = self.session.verify()


def status(desired: Desired, options: Options, connector: Connector | None = None) -> Report:
    with Session(desired, options, connector) as session:
        check = Check(session)
        run_phases([ConnectWhatAnswers(session), check])
        return check.report
