"""Switching the DNS provider of a running cluster, with real Kubernetes and real DNS images: the new
provider answers, nothing of the old one is left, and no query fails. Both providers sit behind the one
`kube-dns` Service, which a node asks ten times a second while `up` switches, once from a new source port
each time (busybox `nslookup`) and once through a forwarder that keeps its port (dnsmasq `--query-port`,
as a resolver that holds its socket does).

The old provider goes only once the new one answers, and its pods leave the Service before they stop:
kube-dns's dnsmasq stops at once when its pod is deleted, and a node whose kube-proxy had not caught up
lost the queries it still sent there (5 within 7 s without the hand-over). Then kube-proxy must delete the
node's UDP flows to the pods that left, or a query whose source port matches one still goes there: with
no `conntrack` in the image, 1 or 2 queries failed in 10 of 32 switches, and through a forwarder that
keeps its port every query failed once kube-dns had gone.
Then to `none` and back: nothing of either provider is left, and names resolve again."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.lab.e2e import (
    edit_cluster_yml,
    host_exec,
    kubectl,
    kubectl_run,
    own_lab,
    probe_failures,
    start_probe,
    up,
)

pytestmark = [pytest.mark.lab, pytest.mark.real_kubernetes, pytest.mark.real_addons]
NAME = "kubernetes.default.svc.cluster.local"
DNS_SERVICE = "10.43.0.10"  # RKE's cluster_dns_server
FORWARDER = "127.0.0.2"  # on node 2: forwards to DNS_SERVICE, always from port 40053, caching nothing
WORKLOADS = {"coredns": ("coredns", "coredns-autoscaler"), "kube-dns": ("kube-dns", "kube-dns-autoscaler")}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    addons = Path(os.environ["RKE_PY_ADDON_BINARIES"])
    with own_lab(tmp_path_factory, "dnsswitch", 2, addon_binaries=addons) as made:
        assert up(made).code == 0
        host_exec(
            made,
            1,
            f"dnsmasq --user=root --group=root --listen-address={FORWARDER} --bind-interfaces --no-resolv"
            f" --no-hosts --cache-size=0 --no-negcache --server={DNS_SERVICE} --query-port=40053"
            " --pid-file=/run/dns-forwarder.pid",
        )
        yield made


def _ready(lab, provider: str) -> None:
    for name in WORKLOADS[provider]:
        kubectl(lab, "-n", "kube-system", "rollout", "status", f"deployment/{name}", "--timeout=180s")


def _switch(lab, provider: str) -> dict[str, tuple[int, int, int]]:
    """Switch to `provider` while node 2 asks the Service ten times a second, directly and through the
    forwarder: probe → (answered, failed, the seconds from the first failure to the last, both counted)."""
    probes = {"dns": DNS_SERVICE, "dns-kept-port": FORWARDER}
    for name, server in probes.items():
        start_probe(lab, 1, name=name, dns=(NAME, server))
    time.sleep(3)
    edit_cluster_yml(lab, lambda data: data["dns"].update(provider=provider))
    run = up(lab)
    assert run.code == 0, run.stderr
    handed = [(x["kind"], x["target"]) for x in run.json()["cluster"] if x["kind"] == "serve-only"]
    assert handed == [("serve-only", f"pods of deployment/kube-system/{provider}")]
    _ready(lab, provider)
    time.sleep(5)
    measured = {}
    for name in probes:
        answered, failures = probe_failures(lab, 1, name)
        seconds = [at for _, _, at in failures]
        span = (max(seconds) - min(seconds) + 1) if seconds else 0
        print(f"switch to {provider}, {name}: {answered} answered, {len(failures)} failed within {span} s")
        measured[name] = (answered, len(failures), span)
    return measured


def test_switching_the_provider_and_back_keeps_names_resolving_and_leaves_nothing_of_the_old_one(lab):
    failed = {}
    for old, provider in (("coredns", "kube-dns"), ("kube-dns", "coredns")):
        _ready(lab, old)
        for probe, (answered, lost, _) in _switch(lab, provider).items():
            assert answered > 50
            failed[(provider, probe)] = lost
        for name in WORKLOADS[old]:
            assert kubectl_run(lab, "-n", "kube-system", "get", "deployment", name).returncode != 0
        assert kubectl_run(lab, "-n", "kube-system", "get", "configmap", old).returncode != 0
    assert failed == dict.fromkeys(failed, 0)

    edit_cluster_yml(lab, lambda data: data["dns"].update(provider="none"))
    assert up(lab).code == 0
    for kind, name in [("service", "kube-dns")] + [("deployment", n) for n in sum(WORKLOADS.values(), ())]:
        assert kubectl_run(lab, "-n", "kube-system", "get", kind, name).returncode != 0
    edit_cluster_yml(lab, lambda data: data["dns"].update(provider="coredns"))
    assert up(lab).code == 0
    _ready(lab, "coredns")
    ask = f"timeout 2 nslookup {NAME} {DNS_SERVICE} >/dev/null && echo resolved"
    ask = f"for i in $(seq 30); do {ask} && break; sleep 1; done"
    assert "resolved" in host_exec(lab, 1, ask)
