"""authentication.webhook: RKE's token webhook, on the apiserver and as a file on every node."""

from __future__ import annotations

import pytest

from rke_py.config import load_text
from rke_py.errors import ConfigError
from rke_py.pki.bundle import build_bundle
from rke_py.plan import build_plan
from rke_py.plan.model import ClusterPlan

NODES = """\
nodes:
- {address: 10.0.0.1, user: root, role: [etcd, controlplane]}
- {address: 10.0.0.2, user: root, role: [worker]}
"""
FILE = "/etc/kubernetes/kube-api-authn-webhook.yaml"


def planned(authentication: str) -> ClusterPlan:
    config = load_text(NODES + "authentication:\n" + authentication).config
    return build_plan(config, build_bundle(config))


def apiserver_flags(plan: ClusterPlan) -> list[str]:
    (spec,) = [p.spec for p in plan.nodes[0].placed if p.spec.name == "kube-apiserver"]
    return [arg for arg in spec.entrypoint if arg.startswith("--authentication-token-webhook")]


def webhook_file(plan: ClusterPlan, index: int) -> str | None:
    found = [f for f in plan.nodes[index].files if f.path == FILE]
    return found[0].content.decode() if found else None


def test_the_webhook_strategy_gets_rke_s_default_file_on_every_node_and_the_flags() -> None:
    plan = planned("  strategy: x509|webhook\n")
    assert apiserver_flags(plan) == [
        "--authentication-token-webhook-cache-ttl=5s",
        f"--authentication-token-webhook-config-file={FILE}",
    ]
    content = webhook_file(plan, 0)
    assert content == webhook_file(plan, 1)
    assert content is not None and "server: http://127.0.0.1:6440/v1/authenticate" in content


def test_a_given_webhook_is_used_as_rke_does_even_without_the_strategy() -> None:
    given = "    config_file: |\n      clusters:\n      - cluster: {server: 'https://authn.example.com/t'}\n"
    plan = planned("  strategy: x509\n  webhook:\n    cache_timeout: 1m\n" + given)
    assert "--authentication-token-webhook-cache-ttl=1m" in apiserver_flags(plan)
    assert "https://authn.example.com/t" in (webhook_file(plan, 1) or "")


def test_without_a_webhook_nothing_is_written() -> None:
    plan = planned("  strategy: x509\n")
    assert apiserver_flags(plan) == [] and webhook_file(plan, 0) is None


@pytest.mark.parametrize(
    ("webhook", "expected"),
    [
        ("    cache_timeout: soon\n", "cluster.yml:7:5: cache_timeout is not a duration"),
        ("    config_file: 'not: [a, kubeconfig'\n", "cluster.yml:7:5: config_file is not a kubeconfig"),
        ("    config_file: 'clusters: [{cluster: {server: /x}}]'\n", "cluster.yml:7:5: config_file is not"),
    ],
)
def test_a_bad_webhook_is_refused_at_its_line(webhook: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_text(NODES + "authentication:\n  strategy: x509|webhook\n  webhook:\n" + webhook)
    assert str(err.value).startswith(expected), str(err.value)
