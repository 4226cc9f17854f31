"""Whether the hosts run the cluster the local state describes, checked before anything is written.

A state lost (a new one is made), damaged, from another cluster, or older than a CA rotation or a new
encryption key would otherwise be deployed over the running cluster: another CA breaks every component's
trust and every token, another key leaves every Secret unreadable. The hashes `observe` reads tell."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from rke_py.deploy.desired import Desired
from rke_py.deploy.facts import HostFacts
from rke_py.errors import HostError, PreflightError
from rke_py.pki.bundle import CA
from rke_py.plan import encryption
from rke_py.plan.common import ca_file, deployed, host_path
from rke_py.state import state_path_for

STEP = "preflight: cluster state"


def check(desired: Desired, observed: Iterable[HostFacts]) -> list[str]:
    """Raises PreflightError when the hosts run another cluster than the local state's; returns the
    addresses of hosts new to the cluster that held another cluster's files (they are overwritten, as
    RKE does with a reused machine)."""
    if desired.state.restored_snapshot:  # a restore deploys the state its snapshot holds, on purpose
        return []
    known_ca, known_keys = _known(desired)
    ca_path = ca_file(desired.config)
    key_path = host_path(desired.config, encryption.PATH)
    state = state_path_for(desired.config_path).name
    foreign: dict[str, str] = {}
    matched = False
    for facts in observed:
        ca, key = facts.file_hashes.get(ca_path), facts.file_hashes.get(key_path)
        if ca is not None and ca not in known_ca:
            foreign[facts.address] = f"its {ca_path} is another CA than {state}'s"
        elif key is not None and key not in known_keys:
            foreign[facts.address] = (
                f"its {key_path} holds a key {state} does not: the Secrets it encrypted would "
                "become unreadable"
            )
        matched = matched or ca in known_ca
    applied = {n.address for n in desired.applied}
    if not foreign or (matched and not applied & foreign.keys()):
        return sorted(foreign)
    config = desired.config_path
    raise PreflightError(
        [HostError(address, STEP, detail) for address, detail in sorted(foreign.items())],
        advice=(
            f"The hosts run a cluster {state_path_for(config)} does not describe: it was lost, damaged, or "
            "is from another cluster or an older run; up would replace the running cluster's certificates "
            f"and keys. Fetch the state the cluster keeps (`rke-py util get-state-file --config {config}`) "
            f"and run again; or, to build a new cluster on these hosts, remove the old one first "
            f"(`rke-py remove --config {config}`)."
        ),
    )


def _known(desired: Desired) -> tuple[set[str], set[str]]:
    """sha256 of every kube-ca.pem and encryption config this run may find on a host: the ones it deploys
    and the ones the state's two sides hold (a rotation cut off leaves either)."""
    state = desired.state
    cas = [
        b[CA].cert_pem
        for b in (desired.bundle, state.desired.certificates, state.current.certificates)
        if CA in b
    ]
    keys = [
        desired.config.encryption_provider,
        state.desired.encryption_config,
        state.current.encryption_config,
    ]
    return (
        {_sha(pem.encode()) for pem in cas},
        {_sha(b"")} | {_sha(deployed(k)) for k in keys if k},
    )


def _sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()
