"""The shared rules every component's flags and binds follow."""

from __future__ import annotations

import pytest

from rke_py.config.schema import BaseService, ClusterConfig
from rke_py.plan.common import host_path, remove_z, render_flags
from rke_py.templating import hostport


@pytest.mark.parametrize(
    ("bind", "expected"),
    [
        ("/etc/kubernetes:/etc/kubernetes:z", "/etc/kubernetes:/etc/kubernetes"),
        ("/etc/cni:/etc/cni:rw,z", "/etc/cni:/etc/cni:rw"),
        ("/var/lib/docker:/var/lib/docker:rw,rslave,z", "/var/lib/docker:/var/lib/docker:rw,rslave"),
        ("/var/lib/kubelet:/var/lib/kubelet:shared,Z", "/var/lib/kubelet:/var/lib/kubelet:shared"),
        ("/etc/resolv.conf:/etc/resolv.conf", "/etc/resolv.conf:/etc/resolv.conf"),
        ("/usr:/host/usr:ro", "/usr:/host/usr:ro"),
        ("/z:/z", "/z:/z"),
    ],
)
def test_remove_z_drops_only_the_selinux_option(bind: str, expected: str) -> None:
    assert remove_z(bind) == expected


def test_flags_are_sorted_extra_args_win_and_arrays_come_last() -> None:
    service = BaseService(
        extra_args={"v": "4", "profiling": ""},
        extra_args_array={"b": ["2", "1"], "a": ["x"]},
    )
    flags = render_flags({"v": "2", "profiling": "false", "leader-elect": "true"}, service)
    assert flags == ("--leader-elect=true", "--profiling=", "--v=4", "--a=x", "--b=2", "--b=1")


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("/", "/etc/kubernetes"),
        ("", "/etc/kubernetes"),
        ("/opt/rke", "/opt/rke/etc/kubernetes"),
        ("/opt/rke/", "/opt/rke/etc/kubernetes"),
    ],
)
def test_host_paths_live_under_prefix_path(prefix: str, expected: str) -> None:
    assert host_path(ClusterConfig(prefix_path=prefix), "/etc/kubernetes") == expected


def test_ipv6_upstreams_are_bracketed() -> None:
    assert hostport("10.0.0.1", 6443) == "10.0.0.1:6443"
    assert hostport("fd00::1", 6443) == "[fd00::1]:6443"
