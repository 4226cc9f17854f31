"""Settings rke-py accepts but does not act on yet are named, so nobody believes they took effect."""

import pytest

from rke_py.config import load_text
from rke_py.errors import ConfigError

BASE = """\
nodes:
- address: 10.0.0.1
  user: root
  role: [etcd, controlplane, worker]
"""


def test_a_plain_file_gets_no_such_warning():
    assert load_text(BASE).warnings == []


def test_secrets_encryption_is_named_with_its_line():
    text = BASE + "services:\n  kube-api:\n    secrets_encryption_config:\n      enabled: true\n"
    warnings = [str(w) for w in load_text(text).warnings]
    assert warnings == [
        "cluster.yml:7:5: warning: secrets encryption is not configured by rke-py — rke-py does not set "
        "this up yet (README, Scope); remove it or set it up yourself",
    ]


def test_add_on_keys_rke_py_does_not_use_are_named_with_their_lines():
    text = (
        BASE
        + "dns:\n  options: {a: b}\nnetwork:\n  plugin: canal\n"
        + "  canal_network_provider: {iface: eth1, x: y}\n"
    )
    loaded = load_text(text)
    assert [str(w) for w in loaded.warnings] == [
        "cluster.yml:6:3: warning: dns.options is not used by the coredns or kube-dns add-on — rke-py "
        "does not use it; remove it",
        "cluster.yml:9:41: warning: network.canal_network_provider.x is not used by rke-py — rke-py does not "
        "use it; remove it",
    ]
    assert loaded.config.network.options["canal_iface"] == "eth1"


def test_strict_turns_them_into_errors():
    with pytest.raises(ConfigError) as err:
        load_text(
            BASE + "services:\n  kube-api:\n    secrets_encryption_config: {enabled: true}\n", strict=True
        )
    assert "secrets encryption is not configured by rke-py" in str(err.value)
