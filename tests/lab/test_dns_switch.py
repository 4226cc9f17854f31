"""Switching the DNS provider of a running cluster, with real Kubernetes and real DNS images: the new
provider answers, nothing of the old one is left, and names stop resolving for at most a moment. Both
providers sit behind the one `kube-dns` Service, which a node asks ten times a second while `up` switches.

The old provider goes only once the new one answers. What is left is kube-proxy's moment: kube-dns's
dnsmasq stops at once when its pod is deleted, and for up to a second (kube-proxy's sync) a node may still
send a query there. CoreDNS keeps answering for 5 s after it is told to stop (its lameduck), so leaving it
costs nothing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.lab.e2e import edit_cluster_yml, kubectl, kubectl_run, own_lab, probe_failures, start_probe, up

pytestmark = [pytest.mark.lab, pytest.mark.real_kubernetes, pytest.mark.real_addons]
NAME = "kubernetes.default.svc.cluster.local"
DNS_SERVICE = "10.43.0.10"  # RKE's cluster_dns_server
WORKLOADS = {"coredns": ("coredns", "coredns-autoscaler"), "kube-dns": ("kube-dns", "kube-dns-autoscaler")}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    addons = Path(os.environ["RKE_PY_ADDON_BINARIES"])
    with own_lab(tmp_path_factory, "dnsswitch", 2, addon_binaries=addons) as made:
        assert up(made).code == 0
        yield made


def _ready(lab, provider: str) -> None:
    for name in WORKLOADS[provider]:
        kubectl(lab, "-n", "kube-system", "rollout", "status", f"deployment/{name}", "--timeout=180s")


def _switch(lab, provider: str) -> tuple[int, int, int]:
    """Switch to `provider` while node 2 asks the Service ten times a second: (answered, failed, the
    seconds from the first failure to the last, both counted)."""
    start_probe(lab, 1, name="dns", dns=(NAME, DNS_SERVICE))
    time.sleep(3)
    edit_cluster_yml(lab, lambda data: data["dns"].update(provider=provider))
    run = up(lab)
    assert run.code == 0, run.stderr
    _ready(lab, provider)
    time.sleep(5)
    answered, failures = probe_failures(lab, 1, "dns")
    seconds = [at for _, _, at in failures]
    span = (max(seconds) - min(seconds) + 1) if seconds else 0
    print(f"switch to {provider}: {answered} answered, {len(failures)} failed within {span} s")
    return answered, len(failures), span


def test_switching_the_provider_and_back_keeps_names_resolving_and_leaves_nothing_of_the_old_one(lab):
    measured = {}
    for old, provider in (("coredns", "kube-dns"), ("kube-dns", "coredns")):
        _ready(lab, old)
        answered, failed, span = _switch(lab, provider)
        assert answered > 50
        for name in WORKLOADS[old]:
            assert kubectl_run(lab, "-n", "kube-system", "get", "deployment", name).returncode != 0
        assert kubectl_run(lab, "-n", "kube-system", "get", "configmap", old).returncode != 0
        measured[provider] = (failed, span)
    assert measured["kube-dns"] == (0, 0)  # CoreDNS left: no query lost
    assert measured["coredns"][0] <= 5  # kube-dns left: kube-proxy's moment, half a second of queries at most
