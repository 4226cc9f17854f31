"""Preflight refuses a host before anything changes, and says why."""

import pytest

from rke_py.config.schema import ClusterConfig, Node
from rke_py.deploy.facts import HostFacts, ObservedContainer
from rke_py.deploy.observe import _read_shell_facts
from rke_py.deploy.preflight import preflight

NODE = Node(address="10.0.0.1", user="root", role=["etcd", "controlplane", "worker"])


def config() -> ClusterConfig:
    return ClusterConfig(nodes=[NODE], prefix_path="/")


def facts(**kw) -> HostFacts:
    base = {"docker_version": "20.10.24", "disk_free_mb": 50_000}
    return HostFacts("10.0.0.1", **(base | kw))


def test_a_ready_host_passes():
    assert preflight(config(), NODE, facts()) is None


def test_an_old_docker_a_busy_port_and_a_full_disk_are_all_reported_at_once():
    error = preflight(
        config(), NODE, facts(docker_version="19.03.1", listening_ports={2379, 6443}, disk_free_mb=100)
    )
    text = str(error)
    assert text.startswith("10.0.0.1: preflight: Docker 19.03.1 is older than 20.10")
    assert "port 2379 (for etcd) is already in use by another program" in text
    assert "port 6443 (for kube-apiserver) is already in use" in text
    assert "only 100 MiB free" in text


def test_ports_held_by_rke_py_own_containers_are_fine():
    ours = {n: ObservedContainer(n, n, "i", True, "h") for n in ("etcd", "kube-apiserver", "kubelet")}
    assert (
        preflight(config(), NODE, facts(listening_ports={2379, 2380, 6443, 10250}, containers=ours)) is None
    )


def test_ignore_docker_version_is_honoured():
    cfg = config()
    cfg.ignore_docker_version = True
    assert preflight(cfg, NODE, facts(docker_version="1.13.1")) is None


def test_shell_facts_parse_hashes_listening_ports_disk_clock_and_hostname():
    out = (
        "abc  /etc/kubernetes/ssl/kube-ca.pem\n"
        "--- ports\n"
        "  sl  local_address rem_address   st\n"
        "   0: 0100007F:192B 00000000:0000 0A 00000000:00000000\n"
        "   1: 0100007F:9C40 0100007F:192B 01 00000000:00000000\n"
        "--- df\n/dev/vda 263174212 23000000 209000000 10% /\n"
        "--- clock\n1700000000\n"
        "--- hostname\nnode-7.example\n"
    )
    f = HostFacts("h")
    _read_shell_facts(
        f, out, ["/etc/kubernetes/ssl/kube-ca.pem", "/etc/kubernetes/ssl/missing.pem"], now=1700018000.5
    )
    assert f.file_hashes == {
        "/etc/kubernetes/ssl/kube-ca.pem": "abc",
        "/etc/kubernetes/ssl/missing.pem": None,
    }
    assert f.listening_ports == {6443}
    assert f.disk_free_mb == 209000000 // 1024
    assert f.clock_offset_s == -18000.5
    assert f.hostname == "node-7.example"  # the leases' holders name it so


@pytest.mark.parametrize(
    ("offset", "said"), [(-18000.5, "5 h 0 min behind"), (61, "1 min ahead of"), (4000, "1 h 7 min ahead of")]
)
def test_a_clock_more_than_a_minute_off_is_refused_with_the_way_to_fix_it(offset, said):
    failure = preflight(config(), NODE, facts(clock_offset_s=offset))
    assert failure is not None and failure.step == "preflight"
    assert f"its clock is {said} this machine's" in failure.detail and "NTP" in failure.detail


def test_a_clock_within_a_minute_passes():
    assert preflight(config(), NODE, facts(clock_offset_s=-59.9)) is None
