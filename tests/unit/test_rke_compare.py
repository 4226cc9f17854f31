"""The comparison of rke-py's containers with RKE's (tests/rke): it must see what differs."""

from __future__ import annotations

from tests.rke import rke


def test_the_comparison_sees_a_difference():
    """A changed flag, a missing container and a foreign label are reported; departures are not."""
    theirs = {"10.0.0.1": {"kubelet": {"command": ["--v=2"], "labels": {"a": "1"}}, "etcd": {}}}
    ours = {"10.0.0.1": {"kubelet": {"command": ["--v=3"], "labels": {"a": "2", "ours": "x"}}}}
    assert rke.differences(theirs, ours) == [
        "10.0.0.1 etcd: only RKE runs it",
        '10.0.0.1 kubelet command: RKE ["--v=2"] rke-py ["--v=3"]',
        '10.0.0.1 kubelet labels: RKE {"a": "1"} rke-py {"a": "2"}',
    ]
    assert rke.unexplained(['10.0.0.2 nginx-proxy binds: RKE [] rke-py ["/x:/y"]']) == []
