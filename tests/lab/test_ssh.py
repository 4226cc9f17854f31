"""SSH transport against a real OpenSSH server on 127.0.0.1, this machine's dockerd as the node's Docker."""

from __future__ import annotations

import contextlib
import datetime
import getpass
import hashlib
import http.server
import io
import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import docker
import paramiko
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from rke_py.config.schema import BastionHost, ClusterConfig, Node
from rke_py.deploy.targets import bastion_target, ssh_target
from rke_py.errors import ConnectError, ExitStatus, HostError
from rke_py.hosts import channels
from rke_py.hosts.channels import ChannelTimeout
from rke_py.hosts.connections import Connections
from rke_py.hosts.docker_api import HostDocker, docker_client
from rke_py.hosts.hostkeys import HostKeyPolicy, HostKeyStore
from rke_py.hosts.keys import PASSPHRASE_ENV, KeyLoader
from rke_py.hosts.libssh2 import LibSession
from rke_py.hosts.ssh import MAX_REDIALS, Connection, SSHTarget, connect

pytestmark = pytest.mark.lab

USER = getpass.getuser()
IMAGE = "rke-py-test/busybox:latest"
LABEL = "rke-py-test"
DOCKER_SOCK = "/var/run/docker.sock"


def _keygen(path: Path, passphrase: str = "") -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "rke-py-test", "-f", str(path)],
        check=True,
    )
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Sshd:
    dir: Path
    port: int
    host_key: Path
    client_key: Path
    streamlocal: bool = True
    extra: str = ""
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def log(self) -> str:
        return (self.dir / f"sshd-{self.port}.log").read_text()

    def logins(self) -> int:
        return self.log.count("Accepted publickey")

    def host_public_key(self) -> str:
        keytype, b64 = self.host_key.with_suffix(".pub").read_text().split()[:2]
        return f"{keytype} {b64}"

    def target(self, key: Path | None = None, **kw) -> SSHTarget:
        return SSHTarget("127.0.0.1", self.port, USER, ssh_key_path=str(key or self.client_key), **kw)

    def start(self) -> None:
        config = self.dir / f"sshd_config-{self.port}"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\n"
            f"AuthorizedKeysFile {self.dir}/authorized_keys\nPidFile {self.dir}/sshd-{self.port}.pid\n"
            "UsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\nAllowTcpForwarding yes\n"
            f"AllowStreamLocalForwarding {'yes' if self.streamlocal else 'no'}\n"
            "Subsystem sftp internal-sftp\n" + self.extra
        )
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        log = open(self.dir / f"sshd-{self.port}.log", "a")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(config)], stderr=log)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {self.log}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not start listening")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture(scope="module")
def keys_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sshkeys")
    _keygen(d / "client")
    _keygen(d / "wrong")
    _keygen(d / "encrypted", passphrase="correct horse")
    (d / "authorized_keys").write_text((d / "client.pub").read_text() + (d / "encrypted.pub").read_text())
    _keygen(d / "hostkey")
    _keygen(d / "hostkey2")
    return d


@pytest.fixture(scope="module")
def start_sshd(keys_dir) -> Iterator[Callable[..., Sshd]]:
    started: list[Sshd] = []

    def start(*, streamlocal: bool = True, host_key: str = "hostkey", extra: str = "") -> Sshd:
        server = Sshd(
            keys_dir,
            _free_port(),
            keys_dir / host_key,
            keys_dir / "client",
            streamlocal=streamlocal,
            extra=extra,
        )
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def sshd(start_sshd) -> Sshd:
    return start_sshd()


@pytest.fixture(autouse=True)
def no_agent(monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.fixture
def conn(sshd) -> Iterator[Connection]:
    """A host reached directly with a key: libssh2's."""
    with connect(sshd.target(), host_keys=HostKeyStore()) as c:
        assert isinstance(c.transport, LibSession)
        yield c


@pytest.fixture
def tunnelled(sshd) -> Iterator[Connection]:
    """A host behind a bastion: paramiko's, over a libssh2 channel."""
    store = HostKeyStore()
    with (
        connect(sshd.target(), host_keys=store) as bastion,
        connect(sshd.target(), host_keys=store, bastion=bastion) as c,
    ):
        assert isinstance(c.transport, paramiko.Transport)
        yield c


@pytest.fixture(scope="module")
def busybox_image() -> Iterator[str]:
    """A tiny image made from the machine's static busybox (nothing can be pulled here)."""
    local = docker.from_env()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add("/bin/busybox", arcname="bin/busybox")
        for applet in ("sh", "echo", "sleep", "cat", "true"):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
    subprocess.run(
        ["docker", "import", "--change", f"LABEL {LABEL}=1", "-", IMAGE],
        input=buf.getvalue(),
        check=True,
        capture_output=True,
    )
    yield IMAGE
    for c in local.containers.list(all=True, filters={"label": LABEL}):
        c.remove(force=True)
    local.images.remove(IMAGE, force=True)
    local.close()


# --- connecting ---------------------------------------------------------------------------------------


def test_one_transport_serves_commands_files_and_docker(sshd):
    before = sshd.logins()
    config = ClusterConfig(nodes=[Node(address="127.0.0.1", port=str(sshd.port), user=USER)])
    config.ssh_key_path = str(sshd.client_key)
    with Connections(host_keys=HostKeyStore()) as conns:
        node = ssh_target(config.nodes[0], config)
        first = conns.get(node)
        assert first.run("echo hello").stdout == b"hello\n"
        first.write_files([(f"{sshd.dir}/reuse/a", b"a", 0o644)])
        assert conns.host(node, DOCKER_SOCK).docker.api.ping()
        assert conns.get(node) is first
        assert conns.get(node).transport is first.transport
        assert conns.opened == 1
    assert sshd.logins() - before == 1


def test_run_passes_stdin_and_reports_status_and_stderr(conn):
    done = conn.run("cat; echo oops >&2; exit 3", input=b"x" * 300_000)
    assert done.rc == 3
    assert done.stdout == b"x" * 300_000
    assert done.stderr == b"oops\n"


def test_run_timeout_is_a_connect_error(conn):
    with pytest.raises(ConnectError, match=r"timed out after 0\.5s"):
        conn.run("sleep 5", timeout=0.5)
    assert conn.run("true").rc == 0  # the connection survives


def test_a_command_that_keeps_talking_outlives_an_idle_timeout_and_a_silent_one_does_not(conn):
    """How a pull through the node's docker CLI runs: as long as it reports a step now and then."""
    talking = conn.run("for i in 1 2 3 4 5 6 7 8; do echo step $i; sleep 0.5; done", timeout=2, idle=True)
    assert talking.rc == 0 and talking.stdout.count(b"step") == 8  # 4 s in all
    with pytest.raises(ConnectError, match=r"timed out after 2s without output"):
        conn.run("echo started; sleep 6", timeout=2, idle=True)


def test_a_command_talking_on_both_streams_loses_none_of_its_output(conn):
    """A command whose output comes in many small pieces on both streams, as a pull's does (a line per
    layer and step): each wait takes what came on both, and all of each stream arrives in order, with the
    exit status."""
    script = "for i in $(seq 300); do echo out-$i; echo err-$i >&2; done; sleep 0.3; echo last; exit 4"
    done = conn.run(script, timeout=5, idle=True)
    assert done.stdout == "".join(f"out-{i}\n" for i in range(1, 301)).encode() + b"last\n"
    assert done.stderr == "".join(f"err-{i}\n" for i in range(1, 301)).encode()
    assert done.rc == 4


def test_closing_a_connection_ends_its_reader_thread_at_once(tunnelled):
    """paramiko's reader sleeps in recv between packets: a run that closes its connections must not leave a
    thread (and a socket) behind per host."""
    assert tunnelled.run("true").rc == 0
    reader = tunnelled.transport
    time.sleep(0.5)  # the command's last packets read: the reader asleep in recv, as between a run's requests
    assert reader.is_alive()
    tunnelled.close()
    reader.join(timeout=2)
    assert not reader.is_alive()


def test_closing_a_direct_connection_leaves_no_thread_or_socket(sshd):
    threads = threading.active_count()
    c = connect(sshd.target(), host_keys=HostKeyStore())
    assert c.run("echo a", input=b"x").rc == 0 and c.run("true").rc == 0
    sock = c.transport.sock
    c.close()
    assert sock.recv(1) == b""  # shut down; the descriptor goes with the session's last channel
    deadline = time.monotonic() + 2  # the feeder of the command with input ends as it ended
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == threads


def test_closed_port_is_connection_refused():
    port = _free_port()
    with pytest.raises(ConnectError) as e:
        connect(SSHTarget("127.0.0.1", port, USER, name="node-a"), host_keys=HostKeyStore())
    assert str(e.value) == f"node-a: ssh: connection refused on port {port}: no SSH server listens there"
    assert e.value.exit_status == ExitStatus.CONNECT


@pytest.mark.parametrize("key", [False, True], ids=["paramiko", "libssh2"])
def test_a_silent_port_times_out_waiting_for_the_banner(keys_dir, key):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        target = SSHTarget("127.0.0.1", port, USER, ssh_key_path=str(keys_dir / "client") if key else "")
        started = time.monotonic()
        with pytest.raises(ConnectError) as e:
            connect(target, host_keys=HostKeyStore(), timeout=1)
    assert time.monotonic() - started < 2.5  # one wait, not one per SSH client
    assert str(e.value) == (
        f"127.0.0.1: ssh: SSH handshake on port {port} failed: no SSH banner within 1s "
        "(is this port an SSH server?)"
    )


def test_wrong_key_lists_the_methods_tried(sshd, keys_dir):
    with pytest.raises(ConnectError) as e:
        connect(sshd.target(keys_dir / "wrong"), host_keys=HostKeyStore())
    message = str(e.value)
    assert f"authentication as {USER} failed" in message
    assert f"tried: publickey with {keys_dir / 'wrong'} (rejected); agent: no agent running" in message
    assert "correct SSH username" in message


def test_wrong_key_tries_the_agent_when_one_runs(sshd, keys_dir, monkeypatch):
    monkeypatch.setenv("SSH_AUTH_SOCK", str(keys_dir / "no-agent.sock"))
    with pytest.raises(ConnectError, match=r"agent: no keys in the agent"):
        connect(sshd.target(keys_dir / "wrong"), host_keys=HostKeyStore())


def test_agent_auth_without_agent_says_so(sshd):
    target = SSHTarget("127.0.0.1", sshd.port, USER, ssh_agent_auth=True)
    with pytest.raises(ConnectError, match=r"agent: no agent running \(SSH_AUTH_SOCK unset\)"):
        connect(target, host_keys=HostKeyStore())


def test_missing_key_file_uses_rkes_wording(sshd, keys_dir):
    with pytest.raises(ConnectError) as e:
        connect(sshd.target(keys_dir / "nope"), host_keys=HostKeyStore())
    assert str(e.value) == (
        f"127.0.0.1: ssh: SSH key file {keys_dir / 'nope'} does not exist. "
        "Please check if the configured key or specified key file is a valid SSH Private Key; "
        "agent: no agent running (SSH_AUTH_SOCK unset)"
    )


def test_encrypted_key_with_passphrase_from_env(sshd, keys_dir, monkeypatch):
    monkeypatch.setenv(PASSPHRASE_ENV, "correct horse")
    with connect(sshd.target(keys_dir / "encrypted"), host_keys=HostKeyStore(), keys=KeyLoader()) as c:
        assert c.run("echo ok").stdout == b"ok\n"


def test_encrypted_key_without_passphrase_names_the_variable(sshd, keys_dir, monkeypatch):
    monkeypatch.delenv(PASSPHRASE_ENV, raising=False)
    with pytest.raises(ConnectError) as e:
        connect(sshd.target(keys_dir / "encrypted"), host_keys=HostKeyStore(), keys=KeyLoader())
    assert "is encrypted and no passphrase is available: set RKE_PY_SSH_PASSPHRASE" in str(e.value)
    assert "correct horse" not in str(e.value)


@pytest.fixture
def agent(keys_dir, tmp_path, monkeypatch) -> Iterator[Callable[[Path], None]]:
    """A real ssh-agent on a socket in tmp_path; the returned function adds a key to it."""
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 5
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))

    def add(key: Path) -> None:
        subprocess.run(["ssh-add", "-q", str(key)], check=True, capture_output=True)

    yield add
    proc.terminate()
    proc.wait(5)


def test_agent_auth_logs_in_with_the_agents_key(sshd, keys_dir, agent):
    agent(keys_dir / "client")
    target = SSHTarget(
        "127.0.0.1", sshd.port, USER, ssh_key_path=str(keys_dir / "absent"), ssh_agent_auth=True
    )
    with connect(target, host_keys=HostKeyStore()) as c:
        assert c.run("echo agent").stdout == b"agent\n"


def test_agent_keys_all_rejected_are_counted(sshd, keys_dir, agent):
    agent(keys_dir / "wrong")
    with pytest.raises(ConnectError, match=r"agent: 1 key, all rejected"):
        connect(sshd.target(keys_dir / "wrong"), host_keys=HostKeyStore())


def test_openssh_certificate_signed_by_a_trusted_ca(start_sshd, keys_dir, tmp_path):
    _keygen(tmp_path / "user_ca")
    user_key = _keygen(tmp_path / "certified")  # not in authorized_keys: only the certificate opens the door
    subprocess.run(
        ["ssh-keygen", "-q", "-s", str(tmp_path / "user_ca"), "-I", "rke-py", "-n", USER, f"{user_key}.pub"],
        check=True,
        capture_output=True,
    )
    server = start_sshd(extra=f"TrustedUserCAKeys {tmp_path / 'user_ca.pub'}\n")
    plain = SSHTarget("127.0.0.1", server.port, USER, ssh_key_path=str(user_key))
    with pytest.raises(ConnectError, match="rejected"):
        connect(plain, host_keys=HostKeyStore())
    certified = SSHTarget(
        "127.0.0.1", server.port, USER, ssh_key_path=str(user_key), ssh_cert_path=f"{user_key}-cert.pub"
    )
    with connect(certified, host_keys=HostKeyStore()) as c:
        assert c.run("echo cert").stdout == b"cert\n"


# --- host keys ----------------------------------------------------------------------------------------


def test_strict_refuses_an_unknown_host(sshd):
    with pytest.raises(ConnectError) as e:
        connect(sshd.target(), host_keys=HostKeyStore(), policy=HostKeyPolicy.STRICT)
    assert f"host key for 127.0.0.1:{sshd.port} is unknown (ssh-ed25519 SHA256:" in str(e.value)
    assert "--host-key-policy is strict" in str(e.value)


def test_accept_new_learns_and_the_pin_then_satisfies_strict(sshd):
    store = HostKeyStore()
    connect(sshd.target(), host_keys=store).close()
    assert store.learned == {f"127.0.0.1:{sshd.port}": sshd.host_public_key()}
    pinned = HostKeyStore(pinned=store.learned)
    connect(sshd.target(), host_keys=pinned, policy=HostKeyPolicy.STRICT).close()
    assert pinned.learned == {}


def test_hashed_known_hosts_entry_satisfies_strict(sshd, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {sshd.host_public_key()}\n")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(known)], check=True, capture_output=True)
    assert "127.0.0.1" not in known.read_text()
    store = HostKeyStore(known_hosts_file=str(known))
    connect(sshd.target(), host_keys=store, policy=HostKeyPolicy.STRICT).close()


def test_changed_host_key_is_refused_with_both_fingerprints(start_sshd, keys_dir):
    server = start_sshd()
    store = HostKeyStore()
    connect(server.target(), host_keys=store).close()
    old_fp = paramiko.PKey.from_path(keys_dir / "hostkey").fingerprint
    server.stop()
    server.host_key = keys_dir / "hostkey2"
    server.start()
    new_fp = paramiko.PKey.from_path(keys_dir / "hostkey2").fingerprint
    pinned = HostKeyStore(pinned=store.learned)
    with pytest.raises(ConnectError) as e:
        connect(server.target(), host_keys=pinned)
    message = str(e.value)
    assert f"host key for 127.0.0.1:{server.port} has changed" in message
    assert f"expected ssh-ed25519 {old_fp} (from cluster state)" in message
    assert f"the server offered ssh-ed25519 {new_fp}" in message
    assert f'remove "127.0.0.1:{server.port}" from rkePy.hostKeys' in message
    assert pinned.learned == {}
    connect(server.target(), host_keys=pinned, policy=HostKeyPolicy.IGNORE).close()
    assert pinned.learned == {}


# --- bastion ------------------------------------------------------------------------------------------


def test_one_bastion_transport_serves_two_targets(sshd):
    before = sshd.logins()
    store = HostKeyStore()
    with connect(sshd.target(), host_keys=store) as bastion:
        a = connect(sshd.target(), host_keys=store, bastion=bastion)
        b = connect(sshd.target(), host_keys=store, bastion=bastion)
        assert a.transport is not b.transport
        for tunnelled in (a, b):
            assert tunnelled.via is bastion
            assert tunnelled.transport.sock.get_transport() is bastion.transport
            assert tunnelled.run("echo through").stdout == b"through\n"
        a.close()
        b.close()
    assert sshd.logins() - before == 3


def test_connections_route_nodes_through_the_bastion(sshd):
    config = ClusterConfig(
        nodes=[Node(address="127.0.0.1", port=str(sshd.port), user=USER)],
        bastion_host=BastionHost(address="127.0.0.1", port=str(sshd.port), user=USER),
        ssh_key_path=str(sshd.client_key),
    )
    with Connections(host_keys=HostKeyStore(), bastion=bastion_target(config)) as conns:
        node = ssh_target(config.nodes[0], config)
        conn = conns.get(node)
        assert conn.via is conns.bastion()
        assert conns.host(node, DOCKER_SOCK).docker.api.ping()
        assert conns.opened == 2


def test_bastion_that_cannot_reach_the_target_says_so(sshd):
    port = _free_port()
    with connect(sshd.target(), host_keys=HostKeyStore()) as bastion, pytest.raises(ConnectError) as e:
        connect(SSHTarget("127.0.0.1", port, USER, name="node-b"), host_keys=HostKeyStore(), bastion=bastion)
    assert f"the bastion 127.0.0.1 could not connect to 127.0.0.1:{port}" in str(e.value)


def _drop(conn: Connection) -> None:
    """The server ends the connection (its session process killed), as a restarted sshd or a reset would."""
    with contextlib.suppress(ConnectError):
        conn.run("kill -9 $PPID", timeout=5)
    deadline = time.monotonic() + 5
    while conn.transport.is_active() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not conn.transport.is_active()


def test_a_quick_command_never_makes_sshd_drop_the_connection(tunnelled, monkeypatch):
    """A command that ends at once: sshd closes its channel as it exits. An EOF rke-py sent for the
    channel after paramiko answered that close (its thread answers while ours sends outside the channel
    lock) would name a channel sshd has freed, and sshd drops the whole connection for it. Delaying every
    EOF makes that race certain: nothing may depend on winning it."""
    send = paramiko.Transport._send_user_message

    def late_eof(self, data):
        if data.asbytes()[:1] == bytes([paramiko.common.MSG_CHANNEL_EOF]):
            time.sleep(0.3)
        return send(self, data)

    monkeypatch.setattr(paramiko.Transport, "_send_user_message", late_eof)
    for _ in range(3):
        assert tunnelled.run("echo quick").stdout == b"quick\n"
        time.sleep(0.5)
    assert tunnelled.transport.is_active() and tunnelled.redials == 0
    assert tunnelled.run("cat").stdout == b""  # its stdin is empty, not waiting for rke-py


def test_every_byte_of_a_large_input_arrives_once_in_order(conn):
    """Input faster than sshd takes it: libssh2 stops half-way through packets, and each write must go on
    where the last stopped (an archive Docker took as "invalid tar header" when bytes went twice)."""
    data = os.urandom(24 << 20)
    done = conn.run("sha256sum", input=data, timeout=120)
    assert done.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()


def test_quick_commands_side_by_side_keep_the_connection(conn):
    """Commands that end at once, with and without input, many at a time: nothing rke-py sends may name a
    channel it has closed (sshd drops the whole connection for that)."""
    failed: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(10):
                assert conn.run(f"echo {i}").stdout == f"{i}\n".encode()
                assert conn.run("exit 3", input=b"x" * 100).rc == 3
        except BaseException as e:  # for the assertion below
            failed.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failed and conn.transport.is_active() and conn.redials == 0, failed


def test_output_in_pieces_side_by_side_arrives_whole_on_each_channel(conn):
    """Several commands on one connection, each writing line by line while the others wait: a reader that
    sleeps until its own channel has data must still get all of it, and none another's."""
    script = "for i in $(seq 40); do echo {tag}-$i; sleep 0.01; done; echo {tag}-err >&2"
    answers: dict[int, object] = {}

    def work(tag: int) -> None:
        answers[tag] = conn.run(script.format(tag=tag), timeout=60)

    threads = [threading.Thread(target=work, args=(tag,)) for tag in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for tag in range(6):
        done = answers[tag]
        assert done.stdout == "".join(f"{tag}-{i}\n" for i in range(1, 41)).encode(), tag
        assert done.stderr == f"{tag}-err\n".encode() and done.rc == 0
    assert conn.transport.is_active() and conn.redials == 0


def test_a_channel_open_that_timed_out_costs_a_login_not_the_next_channel(conn):
    """sshd answers a tunnel's open only once its connect ends: to a port whose backlog is full that takes
    long, and the open times out. libssh2 keeps that open's progress in the session and would hand its
    channel to the next open, so the connection is given up: the next command gets its own channel on a
    new login."""
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        waiting = [socket.socket() for _ in range(3)]
        for s in waiting:  # connects that fill the backlog; the next ones hang
            s.setblocking(False)
            s.connect_ex(full.getsockname())
        try:
            with pytest.raises(ChannelTimeout):
                conn.transport.open_channel("direct-tcpip", full.getsockname(), ("127.0.0.1", 0), timeout=0.5)
            assert conn.run("echo own").stdout == b"own\n"
        finally:
            for s in waiting:
                s.close()
    assert conn.run("echo still").stdout == b"still\n" and conn.redials == 1


def test_a_lost_connection_is_dialled_again_and_the_log_says_why(sshd, tmp_path, caplog):
    before = sshd.logins()
    with connect(sshd.target(), host_keys=HostKeyStore()) as conn:
        assert conn.run("echo first").stdout == b"first\n"
        _drop(conn)
        assert conn.run("echo again").stdout == b"again\n"
        assert conn.redials == 1
    assert sshd.logins() - before == 2
    lost = "127.0.0.1: the SSH connection was lost (the server or the network closed it); connecting again"
    assert lost in caplog.text


def test_a_connection_lost_again_and_again_fails_naming_the_host(sshd):
    with connect(sshd.target(name="node-a"), host_keys=HostKeyStore()) as conn:
        for _ in range(MAX_REDIALS):
            _drop(conn)
            conn.run("true")
        _drop(conn)
        with pytest.raises(ConnectError) as e:
            conn.run("true")
    assert str(e.value).startswith("node-a")
    assert f"the SSH connection was lost {MAX_REDIALS + 1} times" in str(e.value)


def test_a_lost_bastion_is_dialled_again_for_the_hosts_behind_it(sshd):
    store = HostKeyStore()
    with connect(sshd.target(), host_keys=store) as bastion:
        node = connect(sshd.target(), host_keys=store, bastion=bastion)
        _drop(bastion)
        assert node.run("echo through").stdout == b"through\n"
        assert (bastion.redials, node.redials) == (1, 1)
        assert node.transport.sock.get_transport() is bastion.transport
        node.close()


# --- files --------------------------------------------------------------------------------------------


def test_write_file_is_atomic_private_and_creates_parents(conn, tmp_path):
    path = tmp_path / "etc" / "kubernetes" / "ssl" / "kube-ca-key.pem"
    conn.write_files([(str(path), b"first", 0o600)])
    assert path.read_bytes() == b"first"
    assert path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "etc" / "kubernetes").stat().st_mode & 0o777 == 0o755
    with open(path, "rb") as reader:  # a reader of the old file keeps the old content
        conn.write_files([(str(path), b"second", 0o600)])
        assert reader.read() == b"first"
    assert path.read_bytes() == b"second"
    assert not Path(f"{path}.rke-py-tmp").exists()


def test_files_written_together_get_their_own_modes_and_directories(conn, tmp_path):
    ssl, proxy = tmp_path / "kubernetes" / "ssl", tmp_path / "kubernetes" / "nginx-proxy"
    ssl.mkdir(parents=True)
    Path(f"{ssl}/kube-ca.pem.rke-py-tmp").write_bytes(b"left by a run cut off")
    conn.write_files(
        [
            (f"{ssl}/kube-ca.pem", b"ca", 0o644),
            (f"{ssl}/kube-node-key.pem", b"key", 0o600),
            (f"{proxy}/nginx.conf", b"conf", 0o644),
        ]
    )
    written = {
        p.relative_to(tmp_path).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777)
        for p in sorted(tmp_path.rglob("*"))
        if p.is_file()
    }
    assert written == {
        "kubernetes/nginx-proxy/nginx.conf": (b"conf", 0o644),
        "kubernetes/ssl/kube-ca.pem": (b"ca", 0o644),
        "kubernetes/ssl/kube-node-key.pem": (b"key", 0o600),
    }


def test_a_connection_lost_while_a_file_is_written_fails_the_write_naming_the_host(
    conn, tmp_path, monkeypatch
):
    """The connection going as the files are sent fails the write naming the host and the lost connection,
    and nothing escapes from the thread that sends them (a traceback on the user's terminal)."""
    path, failed, escaped = tmp_path / "big", [], []
    monkeypatch.setattr(threading, "excepthook", escaped.append)

    def write() -> None:
        try:
            conn.write_files([(str(path), bytes(256 << 20), 0o600)])
        except BaseException as e:  # whatever escapes, for the assertion below
            failed.append(e)

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(0.3)
    _drop(conn)
    writer.join()
    assert len(failed) == 1 and isinstance(failed[0], ConnectError), failed
    assert str(failed[0]).startswith(f"127.0.0.1: write: cannot write {path}: connection lost"), failed
    assert not path.exists()
    for thread in threading.enumerate():
        if thread.name.endswith("(_feed)"):
            thread.join(10)
    assert not escaped, [e.exc_value for e in escaped]


def test_write_file_does_not_follow_a_planted_temp_symlink(conn, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    target = tmp_path / "config"
    Path(f"{target}.rke-py-tmp").symlink_to(victim)
    conn.write_files([(str(target), b"secret", 0o600)])
    assert victim.read_bytes() == b"untouched"
    assert target.read_bytes() == b"secret"
    assert target.stat().st_mode & 0o777 == 0o600


def test_a_batch_that_cannot_be_written_names_the_file_and_cause_and_leaves_no_temporary_file(conn, tmp_path):
    ssl = tmp_path / "ssl"
    (ssl / "kube-node.pem").mkdir(parents=True)  # a directory where the file goes: it cannot be replaced
    with pytest.raises(HostError) as failed:
        conn.write_files([(f"{ssl}/kube-ca.pem", b"ca", 0o644), (f"{ssl}/kube-node.pem", b"node", 0o644)])
    said = str(failed.value)
    assert said.startswith(f"127.0.0.1: write: cannot write {ssl}/kube-ca.pem and 1 more files: "), said
    assert "kube-node.pem" in said and "directory" in said, said
    assert sorted(p.name for p in ssl.iterdir()) == ["kube-ca.pem", "kube-node.pem"]
    assert (ssl / "kube-node.pem").is_dir()


def test_file_hashes(conn, tmp_path):
    files = [tmp_path / f"f {i}.pem" for i in range(20)]  # a space in the name must survive quoting
    for i, f in enumerate(files):
        f.write_bytes(f"content {i}".encode())
    missing = str(tmp_path / "missing.pem")
    hashes = conn.file_hashes([*map(str, files), missing])
    assert hashes == {
        **{str(f): hashlib.sha256(f"content {i}".encode()).hexdigest() for i, f in enumerate(files)},
        missing: None,
    }


# --- tunnels and health checks ------------------------------------------------------------------------


def _cert(subject: str, issuer_key, issuer_name, key, *, ca: bool = False, sans=()) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer_name or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        names = [x509.IPAddress(ipaddress.ip_address(s)) if s[0].isdigit() else x509.DNSName(s) for s in sans]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(obj) -> bytes:
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    return obj.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """An HTTPS server on 127.0.0.1 that demands a client certificate from its CA (like kube-apiserver)."""
    d = tmp_path_factory.mktemp("tls")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("test-ca", ca_key, None, ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert("kube-apiserver", ca_key, ca.subject, server_key, sans=("127.0.0.1", "localhost"))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert("kube-admin", ca_key, ca.subject, client_key)
    (d / "server.pem").write_bytes(_pem(server) + _pem(server_key))
    (d / "ca.pem").write_bytes(_pem(ca))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / "server.pem")
    ctx.load_verify_locations(d / "ca.pem")
    ctx.verify_mode = ssl.CERT_REQUIRED

    resumed: list[bool] = []  # per TLS request: did the client resume a session

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if isinstance(self.connection, ssl.SSLSocket):
                resumed.append(self.connection.session_reused)
            body = b"ok" if self.path == "/healthz" else b"not found"
            self.send_response(200 if self.path == "/healthz" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    for s in (httpd, plain):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield {
        "port": httpd.server_address[1],
        "plain_port": plain.server_address[1],
        "ca": _pem(ca),
        "cert": _pem(client),
        "key": _pem(client_key),
        "resumed": resumed,
    }
    for s in (httpd, plain):
        s.shutdown()
        s.server_close()


def test_https_get_from_the_node_with_a_client_certificate(conn, tls_server):
    url = f"https://localhost:{tls_server['port']}/healthz"
    status, body = conn.https_get(
        url, ca_pem=tls_server["ca"], cert_pem=tls_server["cert"], key_pem=tls_server["key"]
    )
    assert (status, body) == (200, b"ok")
    status, _ = conn.https_get(
        f"https://127.0.0.1:{tls_server['port']}/missing",
        ca_pem=tls_server["ca"],
        cert_pem=tls_server["cert"],
        key_pem=tls_server["key"],
    )
    assert status == 404


def test_a_probe_again_resumes_its_tls_session_but_never_lends_its_identity(conn, tls_server):
    """Probes repeated while a component starts resume the session the last one made (no certificates
    or signatures again); a request without the client certificate does not ride on that session."""
    url = f"https://localhost:{tls_server['port']}/healthz"
    identity = {"ca_pem": tls_server["ca"], "cert_pem": tls_server["cert"], "key_pem": tls_server["key"]}
    conn.tls_sessions = channels.TLSSessions()
    before = len(tls_server["resumed"])
    assert conn.https_get(url, **identity) == (200, b"ok")
    assert conn.https_get(url, **identity) == (200, b"ok")
    assert tls_server["resumed"][before:] == [False, True]
    with pytest.raises(ConnectError):
        conn.https_get(url, ca_pem=tls_server["ca"])


def test_https_get_without_client_certificate_fails_plainly(conn, tls_server):
    with pytest.raises(ConnectError, match=r"GET https://127.0.0.1:\d+/healthz from the node failed"):
        conn.https_get(f"https://127.0.0.1:{tls_server['port']}/healthz", ca_pem=tls_server["ca"])


def test_http_get_and_a_closed_port(conn, tls_server):
    assert conn.http_get(f"http://127.0.0.1:{tls_server['plain_port']}/healthz") == (200, b"ok")
    port = _free_port()
    with pytest.raises(ConnectError, match=rf"Unable to access the service on 127.0.0.1:{port}"):
        conn.http_get(f"http://127.0.0.1:{port}/healthz")


class _SlowBody(http.server.BaseHTTPRequestHandler):
    """Headers first, the body a moment later, then close: how a busy health endpoint answers."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        time.sleep(0.3)
        self.wfile.write(b"ok")

    def log_message(self, *args) -> None:
        pass


def test_http_get_reads_a_body_that_arrives_after_the_headers(conn):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowBody)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert conn.http_get(f"http://127.0.0.1:{server.server_address[1]}/healthz") == (200, b"ok")
    finally:
        server.shutdown()
        server.server_close()


# --- Docker -------------------------------------------------------------------------------------------


def high_level(host_docker: HostDocker) -> docker.DockerClient:
    """docker-py's high-level client (containers, images) over the node's own API client."""
    client = docker.DockerClient.__new__(docker.DockerClient)
    client.api = host_docker.api
    return client


def test_docker_over_streamlocal_runs_a_container(conn, busybox_image):
    host_docker = docker_client(conn, DOCKER_SOCK)
    client = high_level(host_docker)
    assert client.api.transport_kind == "streamlocal"
    assert client.ping()
    assert client.version()["ApiVersion"]
    container = client.containers.run(
        busybox_image, ["sh", "-c", "echo hello; sleep 30"], detach=True, labels={LABEL: "1"}
    )
    try:
        assert container.id in {c.id for c in client.containers.list(filters={"label": LABEL})}
        # rke-py's exec: docker-py's exec_run loses output that arrives with the response headers
        assert host_docker.exec(container.id, ["echo", "from exec"]) == (0, "from exec\n")
        deadline = time.monotonic() + 10
        while b"hello" not in container.logs() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert container.logs() == b"hello\n"
    finally:
        container.remove(force=True)
    assert container.id not in {c.id for c in client.containers.list(all=True)}
    client.close()


def test_the_channel_that_finds_dockers_socket_carries_the_first_requests(conn, monkeypatch):
    opened = []
    open_unix = conn.open_unix
    monkeypatch.setattr(conn, "open_unix", lambda path, **kw: opened.append(path) or open_unix(path, **kw))
    host_docker = docker_client(conn, DOCKER_SOCK)  # negotiates the API version on the channel it found
    assert host_docker.server_version() == host_docker.info()["ServerVersion"]  # known from negotiating
    assert opened == [DOCKER_SOCK]
    host_docker.close()


def test_exec_returns_every_byte_and_the_exit_code_of_quick_commands(conn, busybox_image):
    """Output that arrives with the response headers used to be lost (file hashes then looked missing)."""
    host_docker = docker_client(conn, DOCKER_SOCK)
    client = high_level(host_docker)
    container = client.containers.run(busybox_image, ["sleep", "60"], detach=True, labels={LABEL: "1"})
    try:
        for i in range(40):
            assert host_docker.exec(container.id, ["echo", f"line {i}"]) == (0, f"line {i}\n")
        # stdout and stderr reach dockerd through two pipes, so their order is not kept: compare lines.
        code, output = host_docker.exec(container.id, ["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (code, sorted(output.splitlines())) == (3, ["err", "out"])
    finally:
        container.remove(force=True)


def test_docker_socket_that_does_not_exist_says_so_first(conn):
    with pytest.raises(ConnectError) as e:
        docker_client(conn, "/run/no-such-docker.sock")
    assert e.value.detail == (
        "cannot reach the Docker socket /run/no-such-docker.sock: there is no socket there; Docker is not "
        "running, or listens elsewhere: start it on the node, or set docker_socket"
    )


@pytest.mark.skipif(shutil.which("docker") is None, reason="needs the docker CLI for dial-stdio")
def test_docker_falls_back_to_dial_stdio_when_streamlocal_is_forbidden(start_sshd, busybox_image):
    server = start_sshd(streamlocal=False)
    with connect(server.target(), host_keys=HostKeyStore()) as c:
        with pytest.raises(paramiko.ChannelException):
            c.open_unix(DOCKER_SOCK)
        client = high_level(docker_client(c, DOCKER_SOCK))
        assert client.api.transport_kind == "dial-stdio"
        assert client.ping()
        assert IMAGE in {t for image in client.images.list() for t in image.tags}
        client.close()


def test_private_key_never_in_messages(sshd, keys_dir):
    key_text = (keys_dir / "wrong").read_text()
    target = SSHTarget("127.0.0.1", sshd.port, USER, ssh_key=key_text)
    assert key_text not in repr(target)
    with pytest.raises(ConnectError) as e:
        connect(target, host_keys=HostKeyStore())
    assert "publickey with inline ssh_key (rejected)" in str(e.value)
    assert "PRIVATE KEY" not in str(e.value)


def test_parallel_workers_share_one_connection(conn):
    client = high_level(docker_client(conn, DOCKER_SOCK))
    results: list[object] = []

    def work(i: int) -> None:
        results.append(conn.run(f"echo {i}").stdout)
        results.append(client.ping())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert {r for r in results if isinstance(r, bytes)} == {f"{i}\n".encode() for i in range(12)}
    assert [r for r in results if not isinstance(r, bytes)] == [True] * 12
    client.close()
