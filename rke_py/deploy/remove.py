"""`remove`: every container and file rke-py put on the hosts, then the local state and kubeconfig."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rke_py.deploy.desired import Desired
from rke_py.deploy.parallel import for_all
from rke_py.deploy.phases import Phase, run_phases
from rke_py.deploy.reconcile import clean_host
from rke_py.deploy.session import Connector, Options, Session
from rke_py.state import kubeconfig_path_for, state_path_for


class Connect(Phase):
    key, title, reads = "connect", "connecting to every host", True

    def __init__(self, session: Session):
        self.session = session

    def run(self) -> None:
        self.session.connect()


class CleanHosts(Phase):
    key, title = "clean", "removing containers and files from every host"

    def __init__(self, session: Session, removed: dict[str, list[str]]):
        self.session = session
        self.removed = removed

    def has_work(self) -> bool:
        return True

    def run(self) -> None:
        d = self.session.desired

        def clean(address: str) -> list[str]:
            target = self.session.targets[address]
            return clean_host(target.host, target.facts, d.config.prefix_path, d.registry)

        results = for_all([n.address for n in d.config.nodes], clean, self.session.options.concurrency)
        self.removed.update(results)


class ForgetLocal(Phase):
    key, title = "forget", "deleting the local state and kubeconfig"

    def __init__(self, desired: Desired):
        self.desired = desired

    def has_work(self) -> bool:
        return True

    def run(self) -> None:
        for path in (state_path_for(self.desired.config_path), kubeconfig_path_for(self.desired.config_path)):
            path.unlink(missing_ok=True)


def remove_phases(session: Session, removed: dict[str, list[str]]) -> Sequence[Phase]:
    return [Connect(session), CleanHosts(session, removed), ForgetLocal(session.desired)]


def remove(
    desired: Desired,
    options: Options,
    on_phase: Callable[[Phase], None] = lambda p: None,
    connector: Connector | None = None,
) -> dict[str, list[str]]:
    """Per host address, the containers removed; the hosts are left as before rke-py."""
    removed: dict[str, list[str]] = {}
    with Session(desired, options, connector) as session:
        run_phases(remove_phases(session, removed), on_phase=on_phase)
    return removed
