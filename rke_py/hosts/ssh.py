"""SSH to a host: one connection per host per run, reused for commands, files, tunnels and Docker.

Opening a connection costs a TCP handshake, a key exchange and a signature (~100 ms, mostly CPU); every
later command is a channel on the same transport (~1 round trip). So a run connects once per host and
hands the `Connection` to everything that needs the host.

A host reached directly with a key file or an inline key logs in with libssh2 (`libssh2.LibSession`:
the SSH protocol in C, not Python); a bastion, a certificate or the agent first take paramiko, which has
them all, as does a login libssh2 could not make (its reason is paramiko's to say then).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import logging
import os
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import paramiko
from ssh2 import exceptions as ssh2_errors
from ssh2.exceptions import SSH2Error

from rke_py.errors import BusyError, ConnectError, HostError, UnreachableError
from rke_py.hosts import channels
from rke_py.hosts.base import TEMPORARY, Completed, disk_full, parse_sha256sum, tar_files
from rke_py.hosts.hostkeys import HostKeyPolicy, HostKeyRejected, HostKeyStore
from rke_py.hosts.keys import KeyLoader, KeyProblem, expand_home, openssh_private
from rke_py.hosts.libssh2 import LibChannel, LibSession

log = logging.getLogger(__name__)
T = TypeVar("T")
Transport = paramiko.Transport | LibSession

_default_keys = KeyLoader()

_NO_METHODS_HINT = (
    "Please check if you are able to SSH to the node using the specified SSH Private Key and if you have "
    "configured the correct SSH username"
)
_TIMEOUT_HINT = "Please check if the node is up and is accepting SSH connections"
# sshd allows 10 sessions (exec) per connection by default (MaxSessions); tunnels do not count.
# 6 concurrent commands (file writes among them) + the Docker dial-stdio fallback's 3 stay within it.
EXEC_SLOTS = 6
# Bytes a second a host takes a file batch at, at least: a batch's timeout grows with its size.
WRITE_RATE = 1 << 20
# A connection lost more often than this in one run is a host problem to report, not a blip to ride out.
MAX_REDIALS = 3
# How long a lost connection is dialled again while nothing answers, as a restarting machine's sshd comes back
REDIAL_PATIENCE_S = 60


class _Transport(paramiko.Transport):
    """paramiko's reader thread wakes every 0.1 s to see whether its transport was closed: about a quarter
    of a millisecond of CPU each second per host, which a slow fresh `up` of many hosts pays for minutes.
    Once a second is enough for the login's own deadlines; after it, `settle()` lets the reader sleep in
    `recv` until a packet comes (50 µs a host each second less, idle), and `close()` wakes it by shutting
    the socket down. Nothing else needs the wakes: no keepalives are sent, and a connection lost without
    a word is noticed by the request that waits on it, as before.

    AES-GCM first (OpenSSH's choice too, after chacha20, which paramiko lacks): it authenticates each packet
    in the cipher's one C call, where CTR with an HMAC adds the HMAC and paramiko's byte-by-byte Python
    comparison of it (small requests, one after another: a seventh less CPU). Servers without it negotiate
    the others as before."""

    _active_check_timeout = 1.0
    _preferred_ciphers = (
        "aes128-gcm@openssh.com",
        "aes256-gcm@openssh.com",
        *(c for c in cast(Any, paramiko.Transport)._preferred_ciphers if "gcm" not in c),
    )

    def settle(self) -> None:
        """The reader waits for packets without waking (after the login)."""
        self.sock.settimeout(None)

    def close(self) -> None:
        if self.is_active() and isinstance(self.sock, socket.socket):  # a bastion's channel wakes on close
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_RDWR)
        super().close()


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to log in. Key material is kept out of repr so a target can be logged."""

    address: str
    port: int = 22
    user: str = ""
    ssh_key: str = field(default="", repr=False)  # inline private key (cluster.yml `ssh_key`)
    ssh_key_path: str = ""
    ssh_cert: str = field(default="", repr=False)  # inline OpenSSH certificate
    ssh_cert_path: str = ""
    ssh_agent_auth: bool = False
    name: str = ""  # how messages name the host (the node name); defaults to the address

    @property
    def label(self) -> str:
        return self.name or self.address


def connect(
    target: SSHTarget,
    *,
    host_keys: HostKeyStore,
    policy: HostKeyPolicy = HostKeyPolicy.ACCEPT_NEW,
    bastion: Connection | None = None,
    timeout: float = 10,
    keys: KeyLoader | None = None,
) -> Connection:
    """Open, check the host key of, and authenticate one SSH connection (through `bastion` if given).

    Every failure is a ConnectError naming the host and saying in plain words what went wrong. The
    connection dials again by the same route and checks if it is lost later in the run.
    """

    def dial() -> Transport:
        return _dial(target, host_keys, policy, bastion, timeout, keys or _default_keys)

    return Connection(target, dial(), bastion, redial=dial)


def _dial(
    target: SSHTarget,
    host_keys: HostKeyStore,
    policy: HostKeyPolicy,
    bastion: Connection | None,
    timeout: float,
    keys: KeyLoader,
) -> Transport:
    started = time.monotonic()
    plain_key = (target.ssh_key or target.ssh_key_path) and not (target.ssh_cert or target.ssh_cert_path)
    if bastion is None and plain_key and not target.ssh_agent_auth:
        session = _dial_libssh2(target, host_keys, policy, timeout, keys)
        if session is not None:
            log.debug("%s: connected in %.0f ms", target.label, (time.monotonic() - started) * 1000)
            return session
    sock = _open_socket(target, bastion, timeout)
    transport = _Transport(sock)
    try:
        transport.banner_timeout = timeout
        transport.auth_timeout = max(timeout, 30)
        options = transport.get_security_options()
        options.key_types = host_keys.preferred_algorithms(
            target.address, target.port, tuple(options.key_types)
        )
        try:
            # The banner wait is bounded by banner_timeout; this bounds banner + key exchange.
            transport.start_client(timeout=2 * timeout)
            if not transport.initial_kex_done:  # start_client returns quietly at its deadline
                raise paramiko.SSHException(f"key exchange did not finish within {2 * timeout:g}s")
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise _fail(
                target, f"SSH handshake on port {target.port} failed: {_handshake_reason(e, timeout)}"
            ) from None
        try:
            shown = transport.get_remote_server_key()
            host_keys.check(target.address, target.port, shown.get_name(), shown.get_base64(), policy)
        except HostKeyRejected as e:
            raise _fail(target, str(e)) from None
        _authenticate(transport, target, keys)
        transport.settle()
    except BaseException:
        transport.close()
        raise
    log.debug("%s: connected in %.0f ms", target.label, (time.monotonic() - started) * 1000)
    return transport


def _dial_libssh2(
    target: SSHTarget, host_keys: HostKeyStore, policy: HostKeyPolicy, timeout: float, keys: KeyLoader
) -> LibSession | None:
    """A libssh2 login, or None where paramiko should try (and explain) instead: a key libssh2 cannot
    use, a server it cannot agree with, a refused key (paramiko goes on to the agent)."""
    if not host_keys.checkable_with(target.address, target.port, _HOST_KEY_TYPES):
        return None  # the known key is of a type libssh2 cannot check (DSA)
    try:
        key = keys.from_text(target.ssh_key) if target.ssh_key else keys.from_file(target.ssh_key_path)
    except KeyProblem:
        return None
    session = LibSession(_open_socket(target, None, timeout))
    try:
        kinds = list(host_keys.preferred_algorithms(target.address, target.port, _HOST_KEY_TYPES))
        try:
            kind, blob = session.handshake(timeout, kinds)
        except (ssh2_errors.Timeout, ssh2_errors.SocketTimeout):  # not again: it would wait as long
            raise _fail(
                target, f"SSH handshake on port {target.port} failed: {_no_banner(timeout)}"
            ) from None
        except (SSH2Error, OSError) as e:  # paramiko's to try again and explain
            log.debug("%s: libssh2 handshake failed (%s); trying paramiko", target.label, e)
            session.close()
            return None
        try:
            host_keys.check(target.address, target.port, kind, base64.b64encode(blob).decode(), policy)
        except HostKeyRejected as e:
            raise _fail(target, str(e)) from None
        try:
            session.authenticate(target.user, openssh_private(key))
        except SSH2Error:
            log.debug("%s: libssh2 login refused (%s); trying paramiko", target.label, session.failure())
            session.close()
            return None
        session.settle()
    except BaseException:
        session.close()
        raise
    return session


# Host key types libssh2 verifies, in paramiko's names (certificates are left to paramiko).
_HOST_KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "rsa-sha2-512",
    "rsa-sha2-256",
    "ssh-rsa",
)


def _lost_reason(transport: Transport) -> str:
    """Why paramiko's transport thread ended, in words."""
    e = transport.get_exception()
    if e is None or isinstance(e, EOFError):
        return "the server or the network closed it"
    return str(e) or type(e).__name__


def _fail(target: SSHTarget, message: str) -> ConnectError:
    return ConnectError(target.label, "ssh", message)


def _unreachable(target: SSHTarget, message: str) -> UnreachableError:
    """No SSH server answered at all (as opposed to one that refused our key or showed another host key)."""
    return UnreachableError(target.label, "ssh", message)


def _open_socket(target: SSHTarget, bastion: Connection | None, timeout: float):
    where = f"{target.address}:{target.port}"
    if bastion is not None:
        try:
            return bastion.opened(
                lambda t: t.open_channel(
                    "direct-tcpip", (target.address, target.port), ("127.0.0.1", 0), timeout=timeout
                )
            )
        except paramiko.ChannelException as e:
            raise _fail(
                target,
                f"the bastion {bastion.target.label} could not connect to {where} ({e.text}). "
                f"{_TIMEOUT_HINT}, and if the bastion allows TCP forwarding (AllowTcpForwarding)",
            ) from None
        except paramiko.SSHException as e:
            raise _fail(target, f"opening a tunnel through the bastion failed: {e}") from None
    try:
        sock = socket.create_connection((target.address, target.port), timeout=timeout)
        # SSH sends many small packets; without this, Nagle + delayed ACK add ~40 ms to each channel open.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    except ConnectionRefusedError:
        raise _unreachable(
            target, f"connection refused on port {target.port}: no SSH server listens there"
        ) from None
    except TimeoutError:
        raise _unreachable(
            target, f"connecting to {where} timed out after {timeout:g}s. {_TIMEOUT_HINT}"
        ) from None
    except socket.gaierror as e:
        raise _unreachable(
            target, f"cannot resolve host name {target.address!r} (DNS: {e.strerror})"
        ) from None
    except OSError as e:
        raise _unreachable(target, f"cannot connect to {where}: {e.strerror or e}. {_TIMEOUT_HINT}") from None


def _no_banner(timeout: float) -> str:
    return f"no SSH banner within {timeout:g}s (is this port an SSH server?)"


def _handshake_reason(e: BaseException, timeout: float) -> str:
    text = str(e)
    if "banner" in text.lower():
        return _no_banner(timeout)
    if isinstance(e, EOFError) or not text:
        return "the server closed the connection"
    return text


def _authenticate(transport: paramiko.Transport, target: SSHTarget, keys: KeyLoader) -> None:
    """Try the configured key (with its certificate), then the agent; explain every failure."""
    tried: list[str] = []
    local_problems: list[str] = []

    def offer(key: paramiko.PKey, what: str) -> bool:
        try:
            transport.auth_publickey(target.user, key)
            return True
        except paramiko.BadAuthenticationType as e:
            tried.append(f"{what} (server allows only: {', '.join(e.allowed_types)})")
        except paramiko.AuthenticationException:
            tried.append(f"{what} (rejected)")
        except paramiko.SSHException as e:
            tried.append(f"{what} ({e})")
        except EOFError:  # the transport's own exception, re-raised: the server closed the connection
            tried.append(f"{what} (the server closed the connection)")
        return False

    def with_key() -> bool:
        label = "inline ssh_key" if target.ssh_key else expand_home(target.ssh_key_path)
        if not target.ssh_key and not target.ssh_key_path:
            return False
        try:
            key = keys.from_text(target.ssh_key) if target.ssh_key else keys.from_file(target.ssh_key_path)
            what = f"publickey with {label}"
            cert = target.ssh_cert or (_read_cert(target.ssh_cert_path) if target.ssh_cert_path else "")
            if cert:
                key = _with_certificate(key, cert)
                what += f" and certificate {target.ssh_cert_path or 'ssh_cert'}"
        except KeyProblem as e:
            local_problems.append(str(e))
            tried.append(f"publickey with {label} ({e})")
            return False
        return offer(key, what)

    def with_agent() -> bool:
        if not os.environ.get("SSH_AUTH_SOCK"):
            tried.append("agent: no agent running (SSH_AUTH_SOCK unset)")
            return False
        agent = paramiko.Agent()
        try:
            agent_keys = agent.get_keys()
            if not agent_keys:
                tried.append("agent: no keys in the agent (or SSH_AUTH_SOCK is not reachable)")
                return False
            for key in agent_keys:
                if not transport.is_active():
                    break
                try:
                    transport.auth_publickey(target.user, key)
                    return True
                except (paramiko.SSHException, EOFError):
                    continue
            tried.append(f"agent: {len(agent_keys)} key{'s' * (len(agent_keys) != 1)}, all rejected")
            return False
        finally:
            agent.close()

    # ssh_agent_auth means "the agent holds the key" (RKE's answer to encrypted keys): ask it first so a
    # defaulted key file is neither read nor prompted for; otherwise the agent is the fallback.
    steps = (with_agent, with_key) if target.ssh_agent_auth else (with_key, with_agent)
    for step in steps:
        if not transport.is_active():
            break
        if step():
            return
    user = target.user or "(no user set)"
    if not transport.is_active():
        tried.append("the server closed the connection (too many attempts? see sshd MaxAuthTries)")
    if local_problems and not any(t.endswith("(rejected)") or "all rejected" in t for t in tried):
        # Nothing reached the server: the key itself is the problem; say that first.
        raise _fail(target, "; ".join(local_problems + [t for t in tried if t.startswith("agent:")]))
    raise _fail(
        target, f"authentication as {user} failed; tried: {'; '.join(tried) or 'nothing'}. {_NO_METHODS_HINT}"
    )


def _read_cert(path: str) -> str:
    path = expand_home(path)
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise KeyProblem(f"cannot read SSH certificate {path}: {e.strerror}") from None


def _with_certificate(key: paramiko.PKey, cert: str) -> paramiko.PKey:
    """A copy of `key` that offers the OpenSSH certificate (the memoised key stays plain)."""
    signed = copy.copy(key)
    try:
        signed.load_certificate(cert.strip())
    except (ValueError, paramiko.SSHException) as e:
        raise KeyProblem(f"the SSH certificate does not fit the key: {e}") from None
    return signed


class Connection:
    """One authenticated SSH connection to a host, shared by every step of a run.

    Thread-safe: channels are opened concurrently on the one transport; file reads and writes are serialised
    by a lock.
    """

    def __init__(
        self,
        target: SSHTarget,
        transport: Transport,
        via: Connection | None = None,
        *,
        redial: Callable[[], Transport] | None = None,
    ):
        self.target = target
        self.transport = transport
        self.via = via  # the bastion connection this one is tunnelled through
        self.redials = 0
        self._redial = redial
        self._redial_lock = threading.Lock()
        self._files_lock = threading.Lock()
        self._exec_slots = threading.BoundedSemaphore(EXEC_SLOTS)
        self.tls_sessions = channels.TLSSessions()  # the node's servers', for its probes to resume

    def __repr__(self) -> str:
        hop = f" via {self.via.target.label}" if self.via else ""
        return f"<Connection {self.target.user}@{self.target.address}:{self.target.port}{hop}>"

    @property
    def host(self) -> str:
        return self.target.label

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closed for good: a thread still using the connection (a run stopped by Ctrl-C) gets an error,
        not a new login."""
        self._redial = None
        self.transport.close()

    def _live(self) -> Transport:
        """The transport, dialled again if the connection was lost (a reset, a restarted sshd, a dropped
        bastion): one lost connection should cost a login, not the run. What was in flight on the old one
        fails as it did; a host that loses it again and again fails the run, naming the reason."""
        transport = self.transport
        if transport.is_active() or self._redial is None:
            return transport
        with self._redial_lock:
            if self.transport is transport:
                reason = _lost_reason(transport)
                if self.redials >= MAX_REDIALS:
                    lost = f"the SSH connection was lost {self.redials + 1} times ({reason})"
                    raise self._error("ssh", lost)
                self.redials += 1
                log.warning("%s: the SSH connection was lost (%s); connecting again", self.host, reason)
                self.transport = self._dial_again(self._redial)
        return self.transport

    def _dial_again(self, dial: Callable[[], Transport]) -> Transport:
        """A new connection, waiting up to REDIAL_PATIENCE_S for a host whose sshd does not answer yet (a
        machine restarting): a refused key or another host key fails at once."""
        deadline, pause = time.monotonic() + REDIAL_PATIENCE_S, 1.0
        while True:
            try:
                return dial()
            except UnreachableError as e:
                if time.monotonic() + pause > deadline:
                    raise
                log.warning("%s: %s; trying again in %g s", self.host, e.detail, pause)
                time.sleep(pause)
                pause = min(2 * pause, 8)

    def opened(self, open_on: Callable[[Transport], T]) -> T:
        """`open_on(transport)` (a channel), tried once more on a new connection when this one turns
        out lost in the attempt: hosts behind a lost bastion notice only as they use their connection."""
        transport = self._live()
        try:
            return open_on(transport)
        except paramiko.ChannelException:
            raise  # the server refused this channel; the connection is fine
        except (paramiko.SSHException, EOFError, OSError) as e:
            if transport.is_active() and isinstance(e, paramiko.SSHException):
                raise  # e.g. a timeout on a connection that still answers
            transport.close()
            try:
                return open_on(self._live())
            except EOFError as again:  # the new connection closed too: paramiko re-raises its EOFError
                raise paramiko.SSHException("the server closed the connection") from again

    # commands

    def run(
        self, cmd: str, *, input: bytes | None = None, timeout: float = 60, idle: bool = False
    ) -> Completed:
        """Run `cmd` through the login shell; feed `input` to its stdin. Times out as ConnectError: after
        `timeout` seconds, or with `idle` after `timeout` seconds without output."""
        with self._exec_slots:
            return self._run(cmd, input, timeout, idle)

    def _run(self, cmd: str, input: bytes | None, timeout: float, idle: bool = False) -> Completed:
        chan = self._session(timeout)
        try:
            self._start(chan, cmd, input)
            quiet = " without output" if idle else ""
            return _collect(
                chan,
                timeout,
                lambda: self._error("exec", f"{cmd!r} timed out after {timeout:g}s{quiet}"),
                idle,
            )
        finally:
            chan.close()

    def _start(self, chan: channels.Channel, cmd: str, input: bytes | None) -> None:
        try:
            if input is not None:
                chan.exec_command(cmd)
                feeder = threading.Thread(target=_feed, args=(chan, input), daemon=True)
                feeder.start()
            else:
                # Empty stdin on the node, rather than an EOF from here: sshd closes a quick command's
                # channel as it exits, and an EOF paramiko sends after answering that close names a channel
                # sshd has freed, for which sshd drops the whole connection.
                chan.exec_command(f"exec </dev/null; {cmd}")
        except (paramiko.SSHException, EOFError) as e:  # the connection went as the command was sent
            why = str(e) or "the server closed the connection"
            raise self._error("exec", f"cannot run {cmd!r}: {why}") from None

    def _session(self, timeout: float) -> channels.Channel:
        try:
            return self.opened(lambda t: t.open_session(timeout=timeout))
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise self._error("exec", f"cannot open an SSH session: {str(e) or 'connection lost'}") from None

    def _error(self, step: str, message: str) -> ConnectError:
        return ConnectError(self.host, step, message)

    # files

    def write_files(self, files: Iterable[tuple[str, bytes, int]]) -> None:
        """Replace each (path, content, mode) atomically, all in one command: tar extracts every file to a
        temporary name beside it, created private and given its mode before it is renamed over the target,
        so readers never see a partial file and secrets are never world-readable; missing directories are
        made 0755. Over SFTP each file cost five requests and their packets; this is one channel."""
        batch = [(path, content, mode) for path, content, mode in files]
        if not batch:
            return
        paths = [path for path, _, _ in batch]
        if not all(path.startswith("/") for path in paths):
            raise ValueError(f"file paths must be absolute: {paths}")
        temporary = [path + TEMPORARY for path in paths]
        archive = tar_files(
            {t.lstrip("/"): (content, mode) for t, (_, content, mode) in zip(temporary, batch, strict=True)}
        )
        directories = sorted({os.path.dirname(path) for path in paths})
        renames = [f"mv -fT -- {shlex.join(pair)}" for pair in zip(temporary, paths, strict=True)]
        script = (
            f"umask 022 && mkdir -p -- {shlex.join(directories)} && umask 077 && "
            f"{{ tar -x -p -o -m -f - -C / && {' && '.join(renames)}; }} "
            f"|| {{ failed=$?; rm -f -- {shlex.join(temporary)}; exit $failed; }}"
        )
        what = f"cannot write {paths[0]}" + (f" and {len(paths) - 1} more files" if len(paths) > 1 else "")
        with self._files_lock:
            try:
                done = self.run(script, input=archive, timeout=60 + len(archive) / WRITE_RATE)
            except ConnectError as e:
                raise self._error("write", f"{what}: connection lost ({e.detail})") from None
        if done.rc == 0:
            return
        if done.rc < 0 or not self.transport.is_active():
            raise self._error("write", f"{what}: connection lost (the command ended without a status)")
        said = done.stderr.decode(errors="replace").strip().splitlines()
        if any("No space left" in line for line in said):
            raise HostError(self.host, "write", f"{what}: {self._fullest(directories)}")
        raise HostError(self.host, "write", f"{what}: {said[-1] if said else f'exit status {done.rc}'}")

    def _fullest(self, directories: list[str]) -> str:
        """What a full disk says, for the one of those holding `directories` with the least room left."""
        df = self.run(f"df -Pk -- {shlex.join(directories)}")
        rows = df.stdout.decode(errors="replace").splitlines()[1:]
        free = [int(r.split()[3]) for r in rows if len(r.split()) >= 4 and r.split()[3].isdigit()]
        if len(free) != len(directories):
            return disk_full(directories[0])
        least = min(range(len(free)), key=free.__getitem__)
        return disk_full(directories[least], free[least])

    def file_hashes(self, paths: list[str]) -> dict[str, str | None]:
        """sha256 of each file in one command (busybox has sha256sum); missing files map to None."""
        hashes: dict[str, str | None] = dict.fromkeys(paths)
        if paths:
            done = self.run(f"sha256sum -- {shlex.join(paths)} 2>/dev/null; true")
            hashes.update(parse_sha256sum(done.stdout.decode(errors="replace"), paths))
        return hashes

    # tunnels from the node itself (like RKE's "network" dialer)

    def open_tcp(self, host: str, port: int, *, timeout: float = 10) -> channels.Channel:
        """A TCP connection made by the node to host:port (so "localhost" is the node itself)."""
        try:
            return self.opened(
                lambda t: t.open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0), timeout=timeout)
            )
        except paramiko.ChannelException as e:
            raise self._error(
                "tunnel",
                f"Unable to access the service on {host}:{port}. The service might be still starting up. "
                f"({e.text})",
            ) from None
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise self._error("tunnel", f"cannot open a tunnel to {host}:{port}: {e}") from None

    def open_unix(self, path: str, *, timeout: float = 10) -> channels.Channel:
        """A connection made by the node to its Unix socket `path` (raises paramiko.ChannelException)."""
        return self.opened(
            lambda t: (
                t.open_unix(path, timeout)
                if isinstance(t, LibSession)
                else channels.open_streamlocal(t, path, timeout=timeout)
            )
        )

    def https_get(
        self,
        url: str,
        *,
        ca_pem: bytes | None = None,
        cert_pem: bytes | None = None,
        key_pem: bytes | None = None,
        timeout: float = 5,
    ) -> tuple[int, bytes]:
        """GET an https URL from the node itself; see `channels.tls_context` for verification rules."""
        return self._get(url, channels.tls_context(ca_pem, cert_pem, key_pem), timeout)

    def http_get(self, url: str, *, timeout: float = 5) -> tuple[int, bytes]:
        """GET a plain http URL from the node itself."""
        return self._get(url, None, timeout)

    def served_certificate(self, port: int, *, timeout: float = 5) -> bytes:
        """The DER certificate the node serves on its own `port` (b"" if it serves none)."""
        chan = self.open_tcp("127.0.0.1", port, timeout=timeout)
        try:
            return channels.peer_certificate(chan, "127.0.0.1", timeout)
        except (OSError, paramiko.SSHException, channels.HTTPProblem) as e:
            raise self._error("tls", f"reading the certificate served on port {port} failed: {e}") from None

    def _get(self, url: str, context, timeout: float) -> tuple[int, bytes]:
        host, port, path = channels.split_url(url)
        chan = self.open_tcp(host, port, timeout=timeout)
        try:
            return channels.http_request(
                chan, host, port, path, context=context, timeout=timeout, sessions=self.tls_sessions
            )
        except (OSError, paramiko.SSHException, channels.HTTPProblem) as e:
            error = BusyError if isinstance(e, channels.NoAnswer) else ConnectError
            raise error(self.host, "http", f"GET {url} from the node failed: {e}") from None


def _feed(chan: channels.Channel, data: bytes) -> None:
    try:
        chan.sendall(data)
        chan.shutdown_write()
    except (OSError, paramiko.SSHException, EOFError):
        pass  # the command exited early, or the connection went: its status tells the story


def _collect(chan: channels.Channel, timeout: float, on_timeout, idle: bool = False) -> Completed:
    """Read stdout and stderr together (so neither can fill the window and stall) until the command exits;
    with `idle`, the timeout counts from the last output."""
    deadline = time.monotonic() + timeout
    out: list[bytes] = []
    err: list[bytes] = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise on_timeout()
        heard = len(out) + len(err)
        if isinstance(chan, LibChannel):
            chan.wait_readable(remaining)
            for into, got in zip((out, err), chan.take(), strict=True):
                into += [got] if got else []
        else:
            select.select([chan], [], [], remaining)
            while chan.recv_stderr_ready():
                err.append(chan.recv_stderr(65536))
            if chan.recv_ready():
                out.append(chan.recv(65536))
        if len(out) + len(err) > heard:
            if idle:
                deadline = time.monotonic() + timeout
            continue
        if chan.eof_received or chan.closed:
            break
    if not chan.status_event.wait(max(deadline - time.monotonic(), 0.1)):
        raise on_timeout()
    while chan.recv_stderr_ready():
        err.append(chan.recv_stderr(65536))
    return Completed(chan.recv_exit_status(), b"".join(out), b"".join(err))
