"""`bastion_host`: every node is reached through one SSH connection to the bastion, as RKE users
with private networks set it up. While rke-py runs, this machine cannot reach the node at all (a firewall
rule the test sets and removes), so SSH, Docker and the Kubernetes API can only go through the bastion."""

from __future__ import annotations

import contextlib
import socket
import subprocess
from collections.abc import Iterator

import pytest

from tests.lab.e2e import cluster_args, containers_on, edit_cluster_yml, host_exec, own_lab, rke_py, up

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    with own_lab(tmp_path_factory, "bastion", 2) as made:
        yield made


@contextlib.contextmanager
def unreachable(address: str) -> Iterator[None]:
    """Refuse every connection from this machine to `address`; the bastion, a host of the lab, still can."""
    rule = ["OUTPUT", "-d", address, "-j", "REJECT"]
    subprocess.run(["iptables", "-I", *rule], check=True)
    try:
        yield
    finally:
        subprocess.run(["iptables", "-D", *rule], check=True)


def test_up_through_a_bastion_builds_the_cluster_and_touches_only_the_nodes(lab):
    bastion, node = lab.hosts

    def through_bastion(d):
        d["nodes"] = [n for n in d["nodes"] if n["address"] == node.address]
        d["nodes"][0]["role"] = ["etcd", "controlplane", "worker"]
        d["bastion_host"] = {"address": bastion.address, "user": "root", "ssh_key_path": str(lab.key_path)}

    edit_cluster_yml(lab, through_bastion)
    with unreachable(node.address):
        with pytest.raises(OSError):
            socket.create_connection((node.address, 22), timeout=2).close()
        run = up(lab)
        assert run.code == 0, run.stderr
        assert run.json()["ok"] is True  # verify asked the API through the bastion
        status = rke_py("status", *cluster_args(lab, "--output", "json"))
        assert status.code == 0, status.stderr
    assert containers_on(lab, 1) and not containers_on(lab, 0)
    # The node saw its SSH session come from the bastion, not from the machine running rke-py.
    assert f"Accepted publickey for root from {bastion.address}" in host_exec(lab, 1, "cat /var/log/sshd.log")
    assert rke_py("remove", *cluster_args(lab, "--force")).code == 0
