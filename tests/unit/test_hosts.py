"""SSH targets from cluster.yml, private-key loading and the messages users see (no network)."""

from __future__ import annotations

import io
import json
import logging
import socket
import subprocess
import tarfile
import threading
from pathlib import Path
from typing import Any, cast

import docker
import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from rke_py.config.schema import BastionHost, ClusterConfig, Node
from rke_py.deploy.targets import bastion_target, ssh_target
from rke_py.errors import ConnectError, ExitStatus, UnreachableError
from rke_py.hosts import docker_api, ssh
from rke_py.hosts.base import Completed, DockerError, tar_one
from rke_py.hosts.channels import ChannelTimeout, split_url
from rke_py.hosts.docker_api import HostDocker, NodeAPIClient, docker_client, socket_problem
from rke_py.hosts.dockerfiles import RENAME_PAIRS
from rke_py.hosts.keys import PASSPHRASE_ENV, KeyLoader, KeyProblem, expand_home
from rke_py.hosts.ssh import SSHTarget

INLINE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot really\n-----END OPENSSH PRIVATE KEY-----\n"


def _config(**node) -> ClusterConfig:
    return ClusterConfig(
        nodes=[Node(address="10.0.0.1", user="rancher", role=["etcd"], **node)],
        ssh_key_path="~/.ssh/cluster_key",
    )


# --- targets ------------------------------------------------------------------------------------------


def test_node_inherits_the_cluster_key_path():
    config = _config()
    target = ssh_target(config.nodes[0], config)
    assert target == SSHTarget(
        address="10.0.0.1", port=22, user="rancher", ssh_key_path="~/.ssh/cluster_key", name="10.0.0.1"
    )


def test_node_key_path_wins_and_port_is_a_number():
    config = _config(port="2222", ssh_key_path="/keys/node", hostname_override="etcd-1")
    target = ssh_target(config.nodes[0], config)
    assert (target.port, target.ssh_key_path, target.label) == (2222, "/keys/node", "10.0.0.1")


def test_inline_key_wins_over_any_path_and_stays_out_of_repr():
    config = _config(ssh_key=INLINE_KEY, ssh_key_path="/keys/node")
    target = ssh_target(config.nodes[0], config)
    assert target.ssh_key == INLINE_KEY
    assert target.ssh_key_path == ""
    assert "PRIVATE KEY" not in repr(target)


def test_cluster_agent_auth_and_cert_path_apply_to_nodes():
    config = _config()
    config.ssh_agent_auth = True
    config.ssh_cert_path = "~/.ssh/id_ed25519-cert.pub"
    target = ssh_target(config.nodes[0], config)
    assert target.ssh_agent_auth
    assert target.ssh_cert_path == "~/.ssh/id_ed25519-cert.pub"


def test_a_port_that_is_not_a_number_names_the_node():
    config = _config(port="ssh")
    with pytest.raises(ConnectError) as e:
        ssh_target(config.nodes[0], config)
    assert str(e.value) == "10.0.0.1: ssh: port 'ssh' is not a number"
    assert e.value.exit_status == ExitStatus.CONNECT


def test_no_bastion_without_bastion_host():
    assert bastion_target(_config()) is None
    config = _config()
    config.bastion_host = BastionHost()
    assert bastion_target(config) is None


def test_bastion_inherits_the_cluster_key_path():
    config = _config()
    config.bastion_host = BastionHost(address="jump.example", port="2200", user="ops")
    assert bastion_target(config) == SSHTarget(
        address="jump.example",
        port=2200,
        user="ops",
        ssh_key_path="~/.ssh/cluster_key",
        name="bastion jump.example",
    )


def test_only_a_leading_tilde_slash_is_expanded():
    assert expand_home("~/.ssh/id_rsa") == str(Path.home() / ".ssh/id_rsa")
    assert expand_home("~other/.ssh/id_rsa") == "~other/.ssh/id_rsa"
    assert expand_home("$HOME/.ssh/id_rsa") == "$HOME/.ssh/id_rsa"
    assert expand_home("/etc/ssh/key") == "/etc/ssh/key"


# --- private keys -------------------------------------------------------------------------------------


def _write_key(
    path: Path, key, password: bytes | None = None, fmt=serialization.PrivateFormat.OpenSSH
) -> Path:
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, fmt, encryption))
    return path


def _no_prompt(label: str) -> None:
    return None


@pytest.mark.parametrize(
    ("key", "fmt", "name"),
    [
        (ed25519.Ed25519PrivateKey.generate(), serialization.PrivateFormat.OpenSSH, "ssh-ed25519"),
        (ec.generate_private_key(ec.SECP256R1()), serialization.PrivateFormat.OpenSSH, "ecdsa-sha2-nistp256"),
        (rsa.generate_private_key(65537, 2048), serialization.PrivateFormat.TraditionalOpenSSL, "ssh-rsa"),
        (ed25519.Ed25519PrivateKey.generate(), serialization.PrivateFormat.PKCS8, "ssh-ed25519"),
    ],
)
def test_key_formats_load(tmp_path, key, fmt, name):
    path = _write_key(tmp_path / "key", key, fmt=fmt)
    loaded = KeyLoader(env={}, prompt=_no_prompt).from_file(str(path))
    assert loaded.get_name() == name


def test_encrypted_key_uses_the_env_passphrase(tmp_path):
    path = _write_key(tmp_path / "key", ed25519.Ed25519PrivateKey.generate(), b"s3cret pass")
    loader = KeyLoader(env={PASSPHRASE_ENV: "s3cret pass"}, prompt=_no_prompt)
    assert loader.from_file(str(path)).get_name() == "ssh-ed25519"


def test_encrypted_key_without_passphrase_or_terminal_names_the_env_var(tmp_path):
    path = _write_key(tmp_path / "key", ed25519.Ed25519PrivateKey.generate(), b"s3cret pass")
    with pytest.raises(KeyProblem) as e:
        KeyLoader(env={}, prompt=_no_prompt).from_file(str(path))
    assert str(e.value).startswith(
        f"SSH key {path} is encrypted and no passphrase is available: set {PASSPHRASE_ENV}"
    )
    assert "ssh_agent_auth: true" in str(e.value)


def test_passphrase_is_asked_once_per_key_per_run(tmp_path):
    path = _write_key(tmp_path / "key", ed25519.Ed25519PrivateKey.generate(), b"s3cret pass")
    asked: list[str] = []

    def prompt(label: str) -> str:
        asked.append(label)
        return "s3cret pass"

    loader = KeyLoader(env={}, prompt=prompt)
    first = loader.from_file(str(path))
    assert loader.from_file(str(path)) is first
    assert asked == [str(path)]


def test_wrong_passphrase_is_named_without_revealing_it(tmp_path):
    path = _write_key(tmp_path / "key", ed25519.Ed25519PrivateKey.generate(), b"s3cret pass")
    with pytest.raises(KeyProblem) as e:
        KeyLoader(env={PASSPHRASE_ENV: "guess"}, prompt=_no_prompt).from_file(str(path))
    assert str(e.value) == f"wrong passphrase for SSH key {path} (passphrase from {PASSPHRASE_ENV})"


def test_missing_key_file_uses_rkes_wording(tmp_path):
    with pytest.raises(KeyProblem) as e:
        KeyLoader(env={}, prompt=_no_prompt).from_file(str(tmp_path / "id_rsa"))
    assert str(e.value) == (
        f"SSH key file {tmp_path / 'id_rsa'} does not exist. "
        "Please check if the configured key or specified key file is a valid SSH Private Key"
    )


def test_a_public_key_is_not_a_private_key(tmp_path):
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    path = tmp_path / "id_ed25519.pub"
    path.write_bytes(key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH))
    with pytest.raises(KeyProblem, match=r"is not an SSH private key\. Please check if the configured key"):
        KeyLoader(env={}, prompt=_no_prompt).from_file(str(path))


def test_a_directory_is_not_a_key(tmp_path):
    with pytest.raises(KeyProblem, match="is a directory"):
        KeyLoader(env={}, prompt=_no_prompt).from_file(str(tmp_path))


def test_inline_key_problems_do_not_echo_the_key():
    with pytest.raises(KeyProblem) as e:
        KeyLoader(env={}, prompt=_no_prompt).from_text(INLINE_KEY, "inline ssh_key")
    assert "not really" not in str(e.value)
    assert str(e.value).startswith("inline ssh_key is not an SSH private key")


# --- wording ------------------------------------------------------------------------------------------


def test_a_docker_socket_problem_leads_with_its_cause_and_advises_what_fits_the_user():
    stopped = socket_problem("/var/run/docker.sock", "root", "there is no socket there", absent=True)
    assert stopped.startswith("cannot reach the Docker socket /var/run/docker.sock: there is no socket there")
    assert "start it on the node" in stopped and "usermod" not in stopped and "RedHat" not in stopped
    root = socket_problem("/var/run/docker.sock", "root", "open failed")
    assert "RedHat/CentOS root cannot use Docker over SSH" in root and "usermod" not in root
    user = socket_problem("/var/run/docker.sock", "ubuntu", "open failed")
    assert "`sudo usermod -aG docker ubuntu`" in user


class _SocketChannel:
    """As much of a paramiko channel as an HTTP connection uses, over one end of a socket pair."""

    def __init__(self, sock: socket.socket):
        self._sock, self.closed, self.eof_received = sock, False, False
        self.settimeout, self.sendall, self.recv = sock.settimeout, sock.sendall, sock.recv

    def close(self) -> None:
        self.closed = True
        self._sock.close()


class _SocketDocker:
    """A Docker daemon at the far end of each channel `open` gives: `answer` is called with each request's
    first line and returns the bytes to send back (a reply without a length ends with the connection, as
    a raw stream does), or None to hang up without answering."""

    def __init__(self, answer):
        self.answer, self.channels = answer, 0

    def _serve(self, sock: socket.socket) -> None:
        with sock, sock.makefile("rb") as stream:
            while line := stream.readline():
                length = 0
                while (header := stream.readline()) not in (b"\r\n", b""):
                    if header.lower().startswith(b"content-length:"):
                        length = int(header.split(b":")[1])
                stream.read(length)
                reply = self.answer(line.decode().strip())
                if reply is None:
                    return
                sock.sendall(reply)
                if b"Content-Length" not in reply:
                    return

    def open(self) -> Any:
        self.channels += 1
        ours, theirs = socket.socketpair()
        threading.Thread(target=self._serve, args=(theirs,), daemon=True).start()
        return _SocketChannel(ours)


def _json_reply(value: object) -> bytes:
    body = json.dumps(value).encode()
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


def _host_docker(daemon: _SocketDocker) -> HostDocker:
    pool = docker_api._Channels(daemon.open, 2)
    return HostDocker(NodeAPIClient(pool, transport_kind="streamlocal", timeout=5), 10, "10.0.0.1")


def test_docker_requests_share_one_kept_channel_and_say_what_docker_answered():
    asked: list[str] = []

    def answer(line: str) -> bytes:
        asked.append(line)
        return _json_reply({"State": {"Running": True}, "Image": "sha256:1"} if "/json" in line else {})

    daemon = _SocketDocker(answer)
    host = _host_docker(daemon)
    host.start("kubelet")
    host.api.inspect_container("kubelet")
    assert daemon.channels == 1  # the second request went on the first one's channel
    assert asked == [
        "POST /v1.24/containers/kubelet/start HTTP/1.1",
        "GET /v1.24/containers/kubelet/json HTTP/1.1",
    ]


def test_a_kept_docker_channel_the_daemon_closed_is_replaced_and_the_request_answered():
    served = 0

    def answer(line: str) -> bytes | None:
        nonlocal served
        served += 1
        return None if served == 2 else _json_reply({})  # the daemon lets the kept connection go

    daemon = _SocketDocker(answer)
    host = _host_docker(daemon)
    host.start("kubelet")
    host.start("kube-proxy")
    assert (served, daemon.channels) == (3, 2)


def test_a_docker_error_answer_reads_as_dockers_message():
    message = json.dumps({"message": "No such container: kubelet"}).encode()
    reply = b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(message), message)
    host = _host_docker(_SocketDocker(lambda line: reply))
    with pytest.raises(DockerError) as said:
        host.start("kubelet")
    assert said.value.missing and "No such container: kubelet" in str(said.value)


def test_an_exec_output_is_read_from_the_raw_stream_docker_sends_until_it_closes():
    def frame(stream: int, data: bytes) -> bytes:
        return bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, "big") + data

    def answer(line: str) -> bytes:
        if "/start" not in line:
            return _json_reply({"Id": "e1"})
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.docker.raw-stream\r\n\r\n"
        return head + frame(1, b"member ") + frame(2, b"warn\n") + frame(1, b"is healthy\n")

    host = _host_docker(_SocketDocker(answer))
    exec_id = host.api.exec_create("etcd", ["etcdctl", "endpoint", "health"])["Id"]
    assert (exec_id, host.api.exec_output(exec_id)) == ("e1", b"member warn\nis healthy\n")  # both streams


def test_a_file_in_a_container_is_read_whole_from_its_archive():
    asked: list[str] = []
    archive = tar_one("snapshot.db", b"etcd data", 0o600)

    def answer(line: str) -> bytes:
        asked.append(line)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\nContent-Length: %d\r\n\r\n"
        return head % len(archive) + archive

    host = _host_docker(_SocketDocker(answer))
    with tarfile.open(fileobj=io.BytesIO(host.read_archive("etcd-save", "/backup/snapshot.db"))) as tar:
        member = tar.next()
        assert member is not None and tar.extractfile(member).read() == b"etcd data"  # type: ignore[union-attr]
    assert asked == ["GET /v1.24/containers/etcd-save/archive?path=%2Fbackup%2Fsnapshot.db HTTP/1.1"]


def test_a_connection_cut_while_docker_works_says_so_before_the_transports_words():
    host = _host_docker(_SocketDocker(lambda line: None))  # Docker (or the host) hangs up on the request
    with pytest.raises(DockerError) as said:
        host._call("wait etcd-restore", host.api.wait, "etcd-restore")
    assert str(said.value) == (
        "wait etcd-restore: the connection to Docker broke before it answered (the host, its network or its "
        "SSH session was lost; Docker closed the connection without answering)"
    )


class _BusyDocker:
    """As much of docker-py's client as a busy daemon shows: each call gets no answer in time, `busy` times
    (counted per call), then works; a container is removed by the first request, even one that timed out."""

    timeout = 50
    server: dict[str, str] | None = None

    def __init__(self, busy: int):
        self.busy, self.asked, self.present = busy, 0, {"kubelet"}

    def _answer(self) -> None:
        self.asked += 1
        if self.asked <= self.busy:
            raise docker_api.TimedOut

    def start(self, container: str) -> None:
        self._answer()

    def version(self, api_version: bool = True) -> dict[str, str]:
        self._answer()
        return {"ApiVersion": "1.41", "Version": "20.10.24"}

    def use_version(self, version: str) -> None:
        self.spoken = version

    def rename(self, container: str, name: str) -> None:
        self._answer()

    def remove_container(self, container: str, force: bool, v: bool) -> None:
        if container not in self.present:
            raise docker.errors.NotFound("No such container")
        self.present.discard(container)
        self._answer()

    def create_container(self, name: str) -> dict[str, str]:
        if name in self.present:
            raise docker.errors.APIError(f'Conflict. The container name "/{name}" is already in use')
        self.present.add(name)  # a create lands even when its answer comes too late
        self._answer()
        return {"Id": f"id-of-{name}"}


def test_a_busy_docker_is_asked_again_while_the_patience_lasts_and_each_retry_is_logged(caplog):
    busy = _BusyDocker(busy=2)
    with caplog.at_level(logging.INFO, logger="rke_py.hosts"):
        HostDocker(cast(NodeAPIClient, busy), 180, "10.0.0.1").start("kubelet")
    assert busy.asked == 3
    said = [r.getMessage() for r in caplog.records]
    assert said == ["10.0.0.1: start kubelet: Docker is busy (no answer in 50 s); asking again"] * 2


def test_a_docker_too_busy_to_say_its_version_at_connect_is_asked_again():
    busy = _BusyDocker(busy=1)
    docker = HostDocker(cast(NodeAPIClient, busy), 180, "10.0.0.1")
    docker.negotiate("auto")
    assert (busy.asked, busy.spoken, docker.server_version()) == (2, "1.41", "20.10.24")


def test_a_busy_docker_fails_the_call_once_the_patience_is_spent_naming_how_often_it_asked():
    busy = _BusyDocker(busy=10)
    with pytest.raises(DockerError) as said:
        HostDocker(cast(NodeAPIClient, busy), 180, "10.0.0.1").start("kubelet")
    assert busy.asked == 3  # three requests of 50 s fit in 180 s, a fourth would not
    assert str(said.value).startswith("start kubelet: Docker did not answer within 50 s (")
    assert str(said.value).endswith("is stuck, asked 3 times in 0 s)")


def test_a_create_answered_too_late_is_asked_again_without_tripping_over_the_name_it_took(caplog):
    busy = _BusyDocker(busy=2)
    with caplog.at_level(logging.INFO, logger="rke_py.hosts"):
        made = HostDocker(cast(NodeAPIClient, busy), 180, "10.0.0.3").create_named(
            "rke-py-file-helper", lambda api: api.create_container(name="rke-py-file-helper")
        )
    assert made == "id-of-rke-py-file-helper"
    assert busy.present == {"kubelet", "rke-py-file-helper"}  # one helper, not a leftover beside it
    said = [r.getMessage() for r in caplog.records]
    retry = "10.0.0.3: create rke-py-file-helper: Docker is busy (no answer in 50 s); asking again"
    assert said == [retry] * 2


def test_a_call_that_is_not_safe_to_repeat_or_no_patience_fails_at_the_first_timeout():
    for patience, call in (
        (180.0, lambda d: d.rename("kubelet", "old-kubelet")),
        (0.0, lambda d: d.start("k")),
    ):
        busy = _BusyDocker(busy=1)
        with pytest.raises(DockerError, match="Docker did not answer within 50 s"):
            call(HostDocker(cast(NodeAPIClient, busy), patience))
        assert busy.asked == 1


class _Channel:
    """One end of a socket pair, as much of a paramiko channel as the Docker client's pool looks at."""

    closed = eof_received = False

    def __init__(self, sock: socket.socket):
        self._sock = sock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _SlowChannels:
    """A host whose sshd answers the first `slow` channel requests too late, then connects each to a Docker
    that answers one version request."""

    host = "10.0.0.2"
    target = SSHTarget(address=host, user="rancher")

    def __init__(self, slow: int):
        self.slow, self.asked = slow, 0

    def open_unix(self, path: str, *, timeout: float = 10) -> _Channel:
        self.asked += 1
        if self.asked <= self.slow:
            raise ChannelTimeout(f"timed out after {timeout:g}s opening a channel to {path}")
        ours, theirs = socket.socketpair()
        threading.Thread(target=self._docker, args=(theirs,), daemon=True).start()
        return _Channel(ours)

    @staticmethod
    def _docker(sock: socket.socket) -> None:
        with sock, sock.makefile("rb") as request:
            while request.readline() not in (b"\r\n", b""):
                pass
            body = json.dumps({"ApiVersion": "1.41", "Version": "24.0.7"}).encode()
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            sock.sendall(head.encode() + body)


def test_a_host_too_busy_to_open_the_docker_channel_in_time_is_asked_again(caplog):
    slow = _SlowChannels(slow=3)  # the first channel, then two of the version request's
    with caplog.at_level(logging.INFO, logger="rke_py.hosts"):
        docker = docker_client(cast(ssh.Connection, slow), timeout=1, patience=5)
    assert (docker.server_version(), slow.asked) == ("24.0.7", 4)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["10.0.0.2: docker version: Docker is busy (no answer in 1 s); asking again"] * 2


def test_a_host_whose_docker_channel_never_opens_fails_once_the_patience_is_spent():
    slow = _SlowChannels(slow=100)
    with pytest.raises(ConnectError) as said:
        docker_client(cast(ssh.Connection, slow), timeout=1, patience=3)
    assert slow.asked == 4  # the first channel, then three requests of 1 s in 3 s
    assert "docker version: Docker did not answer within 1 s" in str(said.value)
    assert "asked 3 times" in str(said.value)


def test_a_remove_whose_first_request_timed_out_after_removing_is_done():
    busy = _BusyDocker(busy=1)
    HostDocker(cast(NodeAPIClient, busy), 180).remove("kubelet")
    assert busy.present == set()
    with pytest.raises(DockerError) as said:  # a container that never was is still an error
        HostDocker(cast(NodeAPIClient, _BusyDocker(busy=0))).remove("etcd")
    assert said.value.missing


class _Transport:
    """As much of paramiko's transport as a lost connection shows."""

    def __init__(self, active: bool):
        self.active = active

    def is_active(self) -> bool:
        return self.active

    def get_exception(self) -> None:
        return None

    def close(self) -> None:
        self.active = False

    def open_channel(self, *args: object, **kwargs: object) -> None:
        self.active = False
        raise EOFError  # as paramiko re-raises its transport thread's exception: the server closed it


def test_a_lost_connection_waits_for_a_restarting_host_but_not_for_a_refused_key(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(ssh.time, "sleep", slept.append)
    back = _Transport(active=True)
    answers: list[object] = [UnreachableError("10.0.0.1", "ssh", "connection refused")] * 3 + [back]

    def dial() -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    target = SSHTarget(address="10.0.0.1")
    conn = ssh.Connection(target, cast(Any, _Transport(active=False)), None, redial=cast(Any, dial))
    assert conn._live() is back and slept == [1, 2, 4]  # sshd answered on the fourth try
    refused = ConnectError("10.0.0.1", "ssh", "the host refused our key")
    answers[:] = [refused]
    conn.transport = cast(Any, _Transport(active=False))
    with pytest.raises(ConnectError) as failed:
        conn._live()
    assert failed.value is refused and slept == [1, 2, 4]


def test_a_connection_that_closes_again_once_dialled_fails_the_step_naming_the_host():
    """paramiko raises a bare EOFError when the server closes the connection; one that escaped was told to
    the user as Ctrl-C ("interrupted")."""
    conn = ssh.Connection(
        SSHTarget(address="10.0.0.1"),
        cast(Any, _Transport(active=True)),
        None,
        redial=lambda: _Transport(True),
    )
    with pytest.raises(ConnectError) as failed:
        conn.open_tcp("127.0.0.1", 6443)
    assert str(failed.value).startswith("10.0.0.1: tunnel: cannot open a tunnel to 127.0.0.1:6443")
    assert "the server closed the connection" in str(failed.value) and conn.redials == 1


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("https://localhost:6443/healthz", ("localhost", 6443, "/healthz")),
        ("http://127.0.0.1:10248/healthz?verbose", ("127.0.0.1", 10248, "/healthz?verbose")),
        ("https://10.0.0.1", ("10.0.0.1", 443, "/")),
    ],
)
def test_health_urls_split(url, parts):
    assert split_url(url) == parts


def test_non_http_urls_are_refused():
    with pytest.raises(ValueError, match="not an http"):
        split_url("tcp://localhost:2379")


def test_the_file_helpers_renames_may_run_twice_and_still_fail_on_a_file_that_was_never_written(tmp_path):
    pairs = []
    for name in ("a", "b"):
        (tmp_path / f".{name}.tmp").write_text(f"new {name}")
        pairs += [str(tmp_path / f".{name}.tmp"), str(tmp_path / name)]
    rename = ["sh", "-c", RENAME_PAIRS, "sh", *pairs]
    assert subprocess.run(rename).returncode == 0
    assert subprocess.run(rename).returncode == 0  # the first run's answer came too late: asked again
    assert [(tmp_path / n).read_text() for n in ("a", "b")] == ["new a", "new b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
    missing = ["sh", "-c", RENAME_PAIRS, "sh", str(tmp_path / ".c.tmp"), str(tmp_path / "c")]
    assert subprocess.run(missing, capture_output=True).returncode != 0


class _CLI:
    """The node's `docker pull`, answering with `rcs` in turn (127: no docker CLI there)."""

    def __init__(self, *rcs: int):
        self.rcs = list(rcs)
        self.pulled: list[str] = []

    def __call__(self, image: str) -> Completed:
        self.pulled.append(image)
        return Completed(self.rcs.pop(0), b"", b"")


def _api_pulls(
    cli: _CLI, images: list[str], auth: dict[str, str] | None = None, missing: str = ""
) -> list[str]:
    """The requests that reached the Docker API while `images` were pulled (the API answers 404 for
    `missing`)."""
    asked: list[str] = []

    def answer(line: str) -> bytes:
        asked.append(line)
        if missing and missing in line:
            body = json.dumps({"message": f"manifest for {missing} not found"}).encode()
            return (
                b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (
                    len(body),
                    body,
                )
            )
        return _json_reply({"status": "Downloaded newer image"})

    host = HostDocker(
        NodeAPIClient(
            docker_api._Channels(_SocketDocker(answer).open, 2), transport_kind="streamlocal", timeout=5
        ),
        10,
        "10.0.0.1",
        cli,
    )
    for image in images:
        try:
            host.pull(image, auth)
        except DockerError as e:
            asked.append(f"error: {e}")
    return asked


def test_an_image_is_pulled_with_the_nodes_docker_cli_and_its_progress_stays_there():
    cli = _CLI(0, 0)
    assert _api_pulls(cli, ["rancher/hyperkube:v1.28.7-rancher1", "rancher/rke-tools:v0.1.96"]) == []
    assert cli.pulled == ["rancher/hyperkube:v1.28.7-rancher1", "rancher/rke-tools:v0.1.96"]


def test_without_a_docker_cli_on_the_node_pulls_go_through_the_api_and_the_cli_is_not_asked_again():
    cli = _CLI(127)
    asked = _api_pulls(cli, ["rancher/hyperkube:v1.28.7-rancher1", "rancher/rke-tools:v0.1.96"])
    assert [line.split("?")[0] for line in asked] == ["POST /v1.24/images/create"] * 2
    assert cli.pulled == ["rancher/hyperkube:v1.28.7-rancher1"]


def test_a_pull_the_cli_failed_is_asked_of_the_api_whose_error_says_why():
    cli = _CLI(1, 0)
    asked = _api_pulls(cli, ["rancher/hyperkube:v9", "rancher/rke-tools:v0.1.96"], missing="hyperkube")
    assert len(asked) == 2 and "hyperkube" in asked[0]  # the failed one; the CLI is still used after it
    assert asked[1] == "error: pull rancher/hyperkube:v9: manifest for hyperkube not found"
    assert cli.pulled == ["rancher/hyperkube:v9", "rancher/rke-tools:v0.1.96"]


def test_an_image_needing_credentials_is_pulled_through_the_api_so_they_never_reach_the_node():
    cli = _CLI()
    asked = _api_pulls(
        cli, ["registry.example:5000/rancher/hyperkube:v1"], {"username": "u", "password": "p"}
    )
    assert len(asked) == 1 and cli.pulled == []


def test_a_cli_pull_whose_connection_broke_fails_naming_the_image_without_asking_the_api():
    def broken(image: str) -> Completed:
        raise ConnectError("10.0.0.1", "exec", "'docker pull' timed out after 300s without output")

    host = HostDocker(cast(NodeAPIClient, None), 10, "10.0.0.1", broken)
    with pytest.raises(DockerError, match="pull rancher/hyperkube:v1: 'docker pull' timed out after 300s"):
        host.pull("rancher/hyperkube:v1", None)


@pytest.mark.parametrize("lost", [EOFError(), OSError("Socket is closed"), paramiko.SSHException("closed")])
def test_files_fed_to_a_command_whose_connection_went_end_quietly(lost):
    """The thread sending a command's stdin (a batch of files) meets the connection gone however paramiko
    says it; the command's status names the loss, and nothing else may reach the user's terminal."""

    sent: list[bytes] = []

    class Gone:
        def sendall(self, data: bytes) -> None:
            sent.append(data)
            raise lost

    ssh._feed(Gone(), b"files")  # type: ignore[arg-type]  # returns, raising nothing
    assert sent == [b"files"]
