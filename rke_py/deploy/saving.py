"""What `up` leaves on the machine it runs on: the state file and the admin kubeconfig (atomic, 0600)."""

from __future__ import annotations

from pathlib import Path

from rke_py.deploy.desired import Desired
from rke_py.files import set_aside, write_private_file
from rke_py.pki.bundle import Bundle
from rke_py.pki.kubeconfig import admin_kubeconfig, default_server
from rke_py.state import State, StateError, kubeconfig_path_for, state_path_for, write_state


def save_state(desired: Desired, *, current: bool) -> Path:
    """The desired state always; the current state too once the hosts match it."""
    state = desired.state
    encryption = desired.config.encryption_provider or ""
    state.desired = State(desired.rke_config, dict(desired.bundle), encryption)
    if current:
        state.current = State(state.desired.rke_config, dict(desired.bundle), encryption)
        state.etcd_members_added = sorted(desired.joined)
        state.restored_snapshot = ""  # the add-ons' pods were restarted before the hosts matched
    path = state_path_for(desired.config_path)
    write_state(path, state)
    return path


def write_kubeconfig(desired: Desired, bundle: Bundle | None = None) -> Path:
    """kube_config_<name>.yml naming the first controlplane node, as RKE's, with `bundle`'s admin
    certificate (this run's by default)."""
    path = kubeconfig_path_for(desired.config_path)
    server = default_server(desired.config)
    write_private_file(path, admin_kubeconfig(desired.config, bundle or desired.bundle, server))
    return path


def rebuild_kubeconfig(desired: Desired) -> tuple[Path, Path | None]:
    """RKE's `util get-kubeconfig`: the admin kubeconfig again from the certificates the cluster runs (the
    state's current ones), touching no host; the file there is kept with a time suffix. Returns the path
    written and where the old file went."""
    running = desired.state.current.certificates
    if not running:
        raise StateError(
            f"{state_path_for(desired.config_path)} records no running cluster: run `rke-py up`, or "
            "`rke-py util get-state-file` to read the state back from the cluster"
        )
    kept = set_aside(kubeconfig_path_for(desired.config_path))
    return write_kubeconfig(desired, running), kept
