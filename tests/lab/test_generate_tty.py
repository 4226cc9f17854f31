"""`rke-py config` on a real terminal (a pty): RKE's questions, in RKE's order, and the file they make."""

from __future__ import annotations

import os
import select
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rke_py.config import load

pytestmark = pytest.mark.lab

# (question as printed, answer typed); "" takes the default shown in brackets.
SCRIPT = [
    ("[+] Cluster Level SSH Private Key Path [~/.ssh/id_rsa]: ", "~/.ssh/id_ed25519"),
    ("[+] Number of Hosts [1]: ", "2"),
    ("[+] SSH Address of host (1) [none]: ", ""),
    ("Error: an answer is needed", ""),
    ("[+] SSH Address of host (1) [none]: ", "10.0.0.1"),
    ("[+] SSH Port of host (1) [22]: ", ""),
    ("[+] SSH Private Key Path of host (10.0.0.1) [none]: ", ""),
    ("[+] SSH User of host (10.0.0.1) [ubuntu]: ", "admin"),
    ("[+] Is host (10.0.0.1) a Control Plane host (y/n)? [y]: ", ""),
    ("[+] Is host (10.0.0.1) a Worker host (y/n)? [y]: ", ""),
    ("[+] Is host (10.0.0.1) an etcd host (y/n)? [y]: ", ""),
    ("[+] Override Hostname of host (10.0.0.1) [none]: ", "cp-1"),
    ("[+] Internal IP of host (10.0.0.1) [none]: ", "172.16.0.1"),
    ("[+] Docker socket path on host (10.0.0.1) [/var/run/docker.sock]: ", ""),
    ("[+] SSH Address of host (2) [none]: ", "10.0.0.2"),
    ("[+] SSH Port of host (2) [22]: ", "2222"),
    ("[+] SSH Private Key Path of host (10.0.0.2) [none]: ", "~/keys/other key"),
    ("[+] SSH User of host (10.0.0.2) [ubuntu]: ", ""),
    ("[+] Is host (10.0.0.2) a Control Plane host (y/n)? [n]: ", ""),
    ("[+] Is host (10.0.0.2) a Worker host (y/n)? [y]: ", "n"),
    ("[+] Is host (10.0.0.2) an etcd host (y/n)? [n]: ", ""),
    ("[-] A host needs at least one role (etcd, controlplane, worker); asking again.", ""),
    ("[+] Is host (10.0.0.2) a Control Plane host (y/n)? [n]: ", ""),
    ("[+] Is host (10.0.0.2) a Worker host (y/n)? [y]: ", "Y"),
    ("[+] Is host (10.0.0.2) an etcd host (y/n)? [n]: ", ""),
    ("[+] Override Hostname of host (10.0.0.2) [none]: ", ""),
    ("[+] Internal IP of host (10.0.0.2) [none]: ", ""),
    ("[+] Docker socket path on host (10.0.0.2) [/var/run/docker.sock]: ", "/run/docker.sock"),
    ("[+] Network Plugin Type (canal, flannel, calico, none) [canal]: ", "flannel"),
    ("[+] Authentication Strategy [x509]: ", ""),
    ("[+] Authorization Mode (rbac, none) [rbac]: ", ""),
    ("[+] Kubernetes version [v1.30.4-rancher1-1]: ", ""),
    ("[+] Cluster domain [cluster.local]: ", ""),
    ("[+] Service Cluster IP Range [10.43.0.0/16]: ", "10.96.0.0/16"),
    ("[+] Cluster Network CIDR [10.42.0.0/16]: ", ""),
    ("[+] Cluster DNS Service IP [10.43.0.10]: ", "10.96.0.10"),
]


class Terminal:
    """A child process on a pseudo-terminal, read up to an expected text before each answer."""

    def __init__(self, args: list[str], cwd: Path):
        self.fd, child = os.openpty()
        self.proc = subprocess.Popen(args, stdin=child, stdout=child, stderr=child, cwd=cwd)
        os.close(child)
        self.seen = ""

    def expect(self, text: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(remaining, 0))
            if not ready:
                raise AssertionError(f"no {text!r} on the terminal; it shows:\n{self.seen}")
            try:
                self.seen += os.read(self.fd, 4096).decode(errors="replace")
            except OSError:  # EIO: the child closed the terminal
                raise AssertionError(f"the process ended before {text!r}; it showed:\n{self.seen}") from None
        self.seen = self.seen[self.seen.index(text) + len(text) :]

    def type(self, line: str) -> None:
        os.write(self.fd, f"{line}\n".encode())

    def close(self) -> int:
        code = self.proc.wait(timeout=30)
        os.close(self.fd)
        return code


def test_answers_on_a_terminal_make_the_cluster_yml(tmp_path: Path):
    term = Terminal([sys.executable, "-m", "rke_py", "config"], tmp_path)
    try:
        for question, answer in SCRIPT:
            term.expect(question)
            if question.startswith("[+]"):
                term.type(answer)
        term.expect("Wrote cluster.yml (2 nodes: 1 etcd, 1 controlplane, 2 worker)")
    finally:
        code = term.close()
    assert code == 0
    path = tmp_path / "cluster.yml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    loaded = load(path)
    assert loaded.warnings == []
    config = loaded.config
    first, second = config.nodes
    assert (first.address, first.port, first.user, first.role) == (
        "10.0.0.1",
        "22",
        "admin",
        ["etcd", "controlplane", "worker"],
    )
    assert (first.hostname_override, first.internal_address, first.ssh_key_path) == (
        "cp-1",
        "172.16.0.1",
        "~/.ssh/id_ed25519",
    )
    assert (second.address, second.port, second.user, second.role) == (
        "10.0.0.2",
        "2222",
        "ubuntu",
        ["worker"],
    )
    assert (second.ssh_key_path, second.docker_socket) == ("~/keys/other key", "/run/docker.sock")
    assert config.network.plugin == "flannel"
    assert config.kubernetes_version == "v1.30.4-rancher1-1"
    assert config.services.kube_api.service_cluster_ip_range == "10.96.0.0/16"
    assert config.services.kubelet.cluster_dns_server == "10.96.0.10"
    assert config.services.kube_controller.cluster_cidr == "10.42.0.0/16"


def test_with_print_the_questions_go_to_stderr_and_stdout_holds_only_the_file(tmp_path: Path):
    fd, child = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rke_py", "config", "--print"],
        stdin=child,
        stdout=subprocess.PIPE,
        stderr=child,
        cwd=tmp_path,
    )
    os.close(child)
    try:
        # Enter for every question: one host with every role, as `roles_by_count(1)` suggests.
        answers = ["", "", "10.0.0.7"] + [""] * 17  # 20 questions for one host
        os.write(fd, "".join(f"{answer}\n" for answer in answers).encode())
        out, _ = proc.communicate(timeout=30)
    finally:
        os.close(fd)
    assert proc.returncode == 0
    text = out.decode()
    assert text.startswith("# If you intended to deploy Kubernetes in an air-gapped environment,")
    assert "[+]" not in text
    assert "  - address: 10.0.0.7\n" in text
    assert "role: [etcd, controlplane, worker]" in text
    assert list(tmp_path.iterdir()) == []
