"""Settings rke-py accepts but does not act on are named, and so are those that act on every run, so
nobody is surprised by either."""

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


def test_rotate_encryption_key_says_at_its_line_that_every_up_rotates():
    warnings = [str(w) for w in load_text(BASE + "rotate_encryption_key: true\n").warnings]
    assert warnings == [
        "cluster.yml:5:1: warning: every `rke-py up` replaces the secrets encryption key while "
        "rotate_encryption_key is true (as RKE's does) — remove it once rotated, or use "
        "`rke-py encrypt rotate-key` instead",
    ]


def test_add_on_keys_rke_py_does_not_use_are_named_with_their_lines():
    text = (
        BASE
        + "dns:\n  options: {a: b}\nnetwork:\n  plugin: canal\n"
        + "  canal_network_provider: {iface: eth1, x: y}\n"
    )
    loaded = load_text(text)
    assert [str(w) for w in loaded.warnings] == [
        "cluster.yml:6:13: warning: dns.options.a is not used by the coredns add-on — rke-py "
        "does not use it; remove it",
        "cluster.yml:9:41: warning: network.canal_network_provider.x is not used by rke-py — rke-py does not "
        "use it; remove it",
    ]
    assert loaded.config.network.options["canal_iface"] == "eth1"


def test_strict_turns_them_into_errors():
    with pytest.raises(ConfigError) as err:
        load_text(BASE + "rotate_encryption_key: true\n", strict=True)
    assert "cluster.yml:5:1: every `rke-py up` replaces the secrets encryption key" in str(err.value)
