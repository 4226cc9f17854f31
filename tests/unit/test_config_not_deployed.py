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


def test_secrets_encryption_and_addons_are_named_with_their_lines():
    text = (
        BASE
        + "services:\n  kube-api:\n    secrets_encryption_config:\n      enabled: true\naddons: |-\n  x\n"
    )
    warnings = [str(w) for w in load_text(text).warnings]
    assert warnings == [
        "cluster.yml:7:5: warning: secrets encryption is not configured by rke-py — rke-py does not set "
        "this up yet (README, Scope); remove it or set it up yourself",
        "cluster.yml:9:1: warning: user addons are not deployed by rke-py — rke-py does not set this up "
        "yet (README, Scope); remove it or set it up yourself",
    ]


def test_strict_turns_them_into_errors():
    with pytest.raises(ConfigError) as err:
        load_text(BASE + "cloud_provider:\n  name: aws\n", strict=True)
    assert "cloud providers are not configured by rke-py" in str(err.value)
