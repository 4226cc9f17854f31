"""Which Kubernetes version changes `up` makes: RKE's order, checked before any host is touched.

A cluster moves forward only, and its control plane one minor version at a time (Kubernetes' skew policy:
an apiserver may be at most one minor newer than the others while they are replaced). A downgrade is
refused: etcd then holds objects the older apiserver may not read; the way back is a snapshot taken
before the upgrade.
"""

from __future__ import annotations

from rke_py.config import kdm
from rke_py.config.findings import Findings
from rke_py.config.schema import ClusterConfig
from rke_py.errors import Problem

PATH = ("kubernetes_version",)


def version_problems(config: ClusterConfig, running: str, source: str) -> list[Problem]:
    """What is wrong with moving a cluster from `running` (its last applied version) to cluster.yml's."""
    wanted = config.kubernetes_version
    old, new = kdm.version_key(running), kdm.version_key(wanted)
    if not running or len(old) < 3 or len(new) < 3 or old == new:
        return []
    findings = Findings(source, config.positions)
    if new < old:
        findings.error(
            PATH,
            f"kubernetes_version {wanted} is older than {running}, which the cluster runs: rke-py does not "
            "downgrade Kubernetes (etcd holds objects the older version may not read)",
            f"keep {running}, or restore a snapshot taken before the upgrade (rke-py etcd snapshot-restore)",
        )
    elif new[:2] > (old[0], old[1] + 1):
        step = f"v{old[0]}.{old[1] + 1}"
        findings.error(
            PATH,
            f"upgrading from {running} to {wanted} skips {step}: the control plane moves one minor "
            "version at a time",
            f"upgrade to a {step} version first (rke-py config --list-version --all)",
        )
    return findings.errors
