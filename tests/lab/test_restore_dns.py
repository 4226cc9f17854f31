"""A snapshot restore on a cluster with real cluster DNS (kube-dns from `--addon-binaries`) ends as RKE's
does: with the add-ons' pods restarted, so that what they hold of the API is what the restore brought back.
On a cluster restored after a whole conformance run, the kube-dns that ran across the restore never learnt
a Service made afterwards (every spec that reached a Service by name failed). This short-lived cluster does
not reproduce that (its kube-dns catches up by itself), so the test checks what a user sees either way:
new kube-dns pods, a Service the restore took away no longer answered, and one made since answered."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.lab.e2e import cluster_args, host_exec, kubectl, own_lab, rke_py, up

pytestmark = [pytest.mark.lab, pytest.mark.real_kubernetes, pytest.mark.real_addons]
DNS_SERVICE = "10.43.0.10"  # RKE's cluster_dns_server


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    addons = Path(os.environ["RKE_PY_ADDON_BINARIES"])
    with own_lab(tmp_path_factory, "restoredns", 1, addon_binaries=addons) as made:
        run = up(made)
        assert run.code == 0, run.stderr
        yield made


def dns_pods(lab) -> set[str]:
    listed = kubectl(lab, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-dns", "-o", "name")
    return set(listed.split())


def resolves(lab, name: str, seconds: int = 60) -> bool:
    """Whether the cluster's DNS Service answers `name` within `seconds`, asked from the node."""
    ask = f"nslookup {name} {DNS_SERVICE} >/dev/null 2>&1 && echo yes || true"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if host_exec(lab, 0, ask).strip() == "yes":
            return True
        time.sleep(2)
    return False


def test_after_a_restore_cluster_dns_answers_for_a_service_made_since(lab):
    kubectl(lab, "-n", "kube-system", "rollout", "status", "deployment/kube-dns", "--timeout=180s")
    saved = rke_py("etcd", "snapshot-save", *cluster_args(lab, "--name", "before"))
    assert saved.code == 0, saved.stderr
    kubectl(lab, "create", "service", "clusterip", "gone-after-restore", "--tcp=80:80")
    assert resolves(lab, "gone-after-restore.default.svc.cluster.local")
    before = dns_pods(lab)
    restored = rke_py("etcd", "snapshot-restore", *cluster_args(lab, "--name", "before", "--force"))
    assert restored.code == 0, restored.stderr
    kubectl(lab, "create", "service", "clusterip", "after-restore", "--tcp=80:80")
    assert resolves(lab, "after-restore.default.svc.cluster.local")
    assert not resolves(lab, "gone-after-restore.default.svc.cluster.local", seconds=5)
    assert "restart-pods pods of deployment/kube-system/kube-dns" in restored.stderr
    assert dns_pods(lab).isdisjoint(before)
