"""SSH in C: libssh2 (through ssh2-python) for the connections of hosts reached directly.

paramiko does the SSH protocol's per-packet work in Python; libssh2 does it in C (what each costs a
request is in docs/performance.md). libssh2 is not
thread-safe, and every step of a run uses a host's connection from its own thread, so each call into a
session is made under the session's lock, in non-blocking mode. A call that must wait for the server
releases the lock: one thread waits on the socket, the others for it (or any call that read the socket)
to say that something came. Whether a call read the socket is known exactly on Linux (the bytes the
kernel received less those still queued); elsewhere it is guessed from whether input was waiting before
the call, and a waiter whose packet another call took unawares looks again by itself soon after.

libssh2 has two rules a shared session must keep. A packet it could send only in part must be finished by
the same call before any other call sends (else BAD_USE, or a corrupt stream): a call that stops half-way
through sending keeps the lock until the socket takes the rest. And a channel is opened, or a command
started, one at a time: opening keeps its progress in the session, and a request's wait for its answer
fails when the answer to another channel's request comes first. Those hold a second lock while they wait.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import select
import socket
import sys
import termios
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import paramiko
from paramiko import common
from ssh2 import exceptions as lib
from ssh2.channel import Channel as _LibChannel
from ssh2.error_codes import LIBSSH2_ERROR_EAGAIN
from ssh2.session import (
    LIBSSH2_METHOD_CRYPT_CS,
    LIBSSH2_METHOD_CRYPT_SC,
    LIBSSH2_METHOD_HOSTKEY,
    LIBSSH2_SESSION_BLOCK_OUTBOUND,
    Session,
)

from rke_py.hosts.channels import ChannelTimeout

T = TypeVar("T")

# AES-GCM first, as for paramiko (ssh._Transport): one C call encrypts and authenticates a packet.
CIPHERS = "aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes128-ctr,aes256-ctr"
# Errors after which the connection cannot carry anything more.
_FATAL = (
    lib.SocketRecvError,
    lib.SocketSendError,
    lib.SocketDisconnectError,
    lib.SocketTimeout,
    lib.DecryptError,
    lib.EncryptError,
    lib.InvalidMACError,
    lib.ProtocolError,
    lib.KeyExchangeError,
    lib.KexFailureError,
    lib.BadUseError,
    lib.BadSocketError,
)
_SOCKET = (lib.SocketRecvError, lib.SocketSendError, lib.SocketDisconnectError)
_CLOSED_BY_PEER = "the server or the network closed it"
# A missed wake-up (a call by another thread that read this thread's packet a moment after it looked at the
# socket) costs at most this long: a waiter looks again by itself, sooner at first. Where reads are counted
# exactly none is missed, and a waiter looks again only this often: each look costs a thread's wake-up
# and a libssh2 call, which made waiting on a minute-long pull cost more CPU than the pull's own output.
_RECHECK_S = (0.005, 0.5)
_EXACT_RECHECK_S = (1.0, 1.0)
# struct tcp_info's tcpi_bytes_received (Linux 4.1 and later)
_TCP_INFO_RECEIVED = 128
_OPEN_FAILURE = {
    "administratively prohibited": common.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED,
    "connect failed": common.OPEN_FAILED_CONNECT_FAILED,
    "unknown channel type": common.OPEN_FAILED_UNKNOWN_CHANNEL_TYPE,
    "resource shortage": common.OPEN_FAILED_RESOURCE_SHORTAGE,
}


class Lost(ConnectionError):
    """The SSH connection is gone (or was closed): nothing more goes over it."""


def _code(result: Any) -> int:
    """libssh2's return code in what ssh2-python gives back (an int, a (code, ...) tuple, or an object)."""
    if isinstance(result, int):
        return result
    if isinstance(result, tuple):
        return result[0]
    return 0


def _wait_fd(fd: int, events: int, timeout: float | None) -> bool:
    poller = select.poll()
    poller.register(fd, events)
    return bool(poller.poll(None if timeout is None else max(timeout, 0) * 1000))


def _bytes_taken(sock: socket.socket) -> int | None:
    """Bytes read from the socket so far (received less still queued), or None where the system cannot
    say."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_RECEIVED + 8)
        queued = array.array("i", [0])
        fcntl.ioctl(sock.fileno(), termios.FIONREAD, queued)
    except (AttributeError, OSError):
        return None
    if len(info) < _TCP_INFO_RECEIVED + 8:
        return None
    return int.from_bytes(info[_TCP_INFO_RECEIVED : _TCP_INFO_RECEIVED + 8], sys.byteorder) - queued[0]


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


class LibSession:
    """One libssh2 session on a connected socket, shared by threads; the calls `ssh.Connection` makes of a
    paramiko Transport, with channels shaped like paramiko's."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        sock.setblocking(False)
        self._session = Session()
        self._lock = threading.Lock()
        self._requests = threading.Lock()  # one channel open or request at a time (see the module's doc)
        self._changed = threading.Condition(self._lock)
        self._round = 0  # moves when a call read from the socket: waiters look at their channel again
        self._poller: int | None = None  # the thread that waits on the socket for everyone
        self._callers = 0  # threads in `call`: with one, no other waits for what its reads bring
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        weakref.finalize(self, os.close, self._wake)
        self._lost: str | None = None
        self._dropped: list[_LibChannel] = []  # channels let go without close(), closed under the lock
        self._taken = _bytes_taken(sock)  # None: reads are guessed, not counted
        self._recheck = _RECHECK_S if self._taken is None else _EXACT_RECHECK_S

    # the login: one thread, blocking calls with a deadline

    def handshake(self, timeout: float, host_key_types: list[str]) -> tuple[str, bytes]:
        """Key exchange; the server's host key as (type, SSH blob)."""
        s = self._session
        s.set_timeout(int(timeout * 1000))
        s.set_blocking(True)
        s.method_pref(LIBSSH2_METHOD_HOSTKEY, ",".join(host_key_types))
        s.method_pref(LIBSSH2_METHOD_CRYPT_CS, CIPHERS)
        s.method_pref(LIBSSH2_METHOD_CRYPT_SC, CIPHERS)
        s.handshake(self.sock)
        blob, _ = s.hostkey()
        kind = paramiko.Message(blob).get_text()
        return kind, blob

    def authenticate(self, user: str, private_openssh: bytes) -> None:
        """Public-key login with the key in OpenSSH's format (kept in memory); raises on refusal."""
        self._session.userauth_publickey_frommemory(user, private_openssh)

    def settle(self) -> None:
        """After the login, calls return at once and threads wait as the module says."""
        self._session.set_timeout(0)
        self._session.set_blocking(False)

    def failure(self) -> str:
        """libssh2's words for its last error."""
        try:
            return self._session.last_error() or "no reason given"
        except IndexError:  # ssh2-python, when libssh2 has no message
            return "no reason given"

    # shared use

    def is_active(self) -> bool:
        """Not lost: also asks the socket, as nothing reads it between requests (paramiko's thread
        would have seen the server hang up)."""
        if self._lost is None and _wait_fd(self.sock.fileno(), select.POLLRDHUP, 0):
            with self._lock:
                self._lost = self._lost or _CLOSED_BY_PEER
        return self._lost is None

    def get_exception(self) -> BaseException | None:
        return None if self._lost is None else Lost(self._lost)

    def close(self) -> None:
        with self._lock:
            if self._lost is None:
                self._lost = "the connection was closed"
                with contextlib.suppress(lib.SSH2Error):
                    self._session.disconnect()
            self._changed.notify_all()
        # Shut down, not closed: a channel freed later may still write to the descriptor, which must not
        # by then belong to another connection. It is closed with the last channel of the session.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self._poke()

    def drop(self, chan: _LibChannel) -> None:
        """A channel let go without close(): freeing it sends, so that waits for the lock (`_attempt`)."""
        self._dropped.append(chan)

    def call(self, op: Callable[[], T], deadline: float | None, ready: Callable[[], bool] | None = None) -> T:
        """`op()` (one libssh2 call on this session) made under the lock until it no longer says EAGAIN;
        TimeoutError at `deadline`, Lost when the connection goes. `ready` (asked under the lock): whether
        what `op` waits for may have come, so that a packet read for one channel does not send every
        other channel's reader back to libssh2 for nothing (a host's probes wait side by side)."""
        pause = self._recheck[0]
        polling = entered = False
        try:
            while True:
                with self._lock:
                    if not entered:
                        self._callers += 1
                        entered = True
                    result = self._attempt(op, deadline)
                    if _code(result) != LIBSSH2_ERROR_EAGAIN:
                        return result
                    seen = self._round
                left = _left(deadline)
                if left is not None and left <= 0:
                    raise TimeoutError("timed out")
                polling = self._await(seen, pause if left is None else min(pause, left), ready, polling)
                pause = min(2 * pause, self._recheck[1])
        finally:
            with self._lock:
                self._callers -= entered
                if polling:  # someone else waits on the socket now
                    self._poller = None
                    self._changed.notify_all()

    def request(self, op: Callable[[], T], deadline: float | None) -> T:
        """`call` for a channel open or request, one at a time."""
        if not self._requests.acquire(timeout=-1 if deadline is None else max(_left(deadline) or 0, 0)):
            raise TimeoutError("timed out waiting for another channel request")
        try:
            return self.call(op, deadline)
        finally:
            self._requests.release()

    def under_lock(self, op: Callable[[], T]) -> T:
        """`op()` for a call that never waits (a channel's state), under the lock."""
        with self._lock:
            return op()

    def sending(self) -> bool:
        """The last call stopped with a packet half sent (called under the lock)."""
        return bool(self._session.block_directions() & LIBSSH2_SESSION_BLOCK_OUTBOUND)

    def _attempt(self, op: Callable[[], T], deadline: float | None) -> T:
        if self._lost is not None:
            raise Lost(self._lost)
        guessed = self._taken is None and _wait_fd(self.sock.fileno(), select.POLLIN, 0)
        try:
            while self._dropped:
                self._finish(self._dropped.pop().close, deadline)
            result = self._finish(op, deadline)
        except _FATAL as e:
            self._lose(_CLOSED_BY_PEER if isinstance(e, _SOCKET) else self.failure())
        finally:
            # Packets for other channels may have been read; with no other call under way, nobody
            # waits to hear it (nor is the socket asked: two system calls, each a turn of the GIL).
            if guessed or (self._callers > 1 and self._read_some()):
                self._round += 1
                self._changed.notify_all()
                if self._poller not in (None, threading.get_ident()):  # it did not read this
                    self._poke()
        return result

    def _read_some(self) -> bool:
        """The last call read from the socket (counted; called under the lock)."""
        if self._taken is None:
            return False
        taken = _bytes_taken(self.sock)
        if taken is None or taken == self._taken:
            return False
        self._taken = taken
        return True

    def _finish(self, op: Callable[[], T], deadline: float | None) -> T:
        result = op()
        while _code(result) == LIBSSH2_ERROR_EAGAIN and self.sending():
            if not _wait_fd(self.sock.fileno(), select.POLLOUT, _left(deadline)):
                self._lose("the server took no data in time")  # half a packet sent: unusable
            result = op()
        return result

    def _lose(self, why: str) -> None:
        """Called under the lock."""
        if self._lost is None:
            self._lost = why
        self._changed.notify_all()
        self._poke()
        raise Lost(self._lost)

    def wake_all(self) -> None:
        """Every waiting thread looks at its channel again (called under the lock)."""
        self._round += 1
        self._changed.notify_all()
        self._poke()

    def _poke(self) -> None:
        with contextlib.suppress(OSError):
            os.eventfd_write(self._wake, 1)

    def _await(self, seen: int, timeout: float, ready: Callable[[], bool] | None, polling: bool) -> bool:
        """Until something came that the caller may want, or `timeout`. One thread waits on the socket
        (and stays the one until its call ends, so the others are not all woken to hand the role over);
        the others wait for a call that read it. Returns whether this thread waits on the socket."""
        if not polling:
            end = time.monotonic() + timeout
            with self._lock:
                while True:
                    if self._lost is not None or (self._round != seen and (ready is None or ready())):
                        return False
                    if self._poller is None:
                        self._poller = threading.get_ident()
                        break
                    left = end - time.monotonic()
                    if left <= 0:
                        return False
                    self._changed.wait(left)
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        poller.register(self._wake, select.POLLIN)
        if any(fd == self._wake for fd, _ in poller.poll(timeout * 1000)):
            with contextlib.suppress(OSError):
                os.eventfd_read(self._wake)
        return True

    # channels

    def open_session(self, timeout: float | None = None) -> LibChannel:
        return self._open(self._session.open_session, "session", timeout)

    def open_channel(
        self,
        kind: str,
        dest_addr: tuple[str, int],
        src_addr: tuple[str, int],
        timeout: float | None = None,
    ) -> LibChannel:
        if kind != "direct-tcpip":
            raise ValueError(f"unsupported channel type {kind}")
        host, port = dest_addr
        return self._open(
            lambda: self._session.direct_tcpip_ex(host, port, src_addr[0], src_addr[1]),
            f"{host}:{port}",
            timeout,
        )

    def open_unix(self, path: str, timeout: float | None = None) -> LibChannel:
        return self._open(lambda: self._session.direct_streamlocal_ex(path, "127.0.0.1", 0), path, timeout)

    def _open(self, op: Callable[[], Any], what: str, timeout: float | None) -> LibChannel:
        """A new channel. An open that timed out is still under way in the session: libssh2 keeps its
        progress there and would hand its channel to the next open, which cannot start before sshd
        answers (for a tunnel, when its connect ends). So the connection is given up, and the next use
        logs in again."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            opened = self.request(op, deadline)
        except TimeoutError:
            with self._lock:
                self._lost = self._lost or "a channel open got no answer in time"
            raise ChannelTimeout(f"timed out after {timeout:g}s opening a channel to {what}") from None
        except lib.ChannelFailure:
            said = self.failure()
            reason = said.partition("(")[2].rstrip(")") or said
            code = _OPEN_FAILURE.get(reason, common.OPEN_FAILED_CONNECT_FAILED)
            raise paramiko.ChannelException(code, reason) from None
        except lib.SSH2Error:
            raise paramiko.SSHException(self.failure()) from None
        return LibChannel(self, opened)


class _Writer:
    """One write of `data` made through `LibSession.call`, which calls it again while it says EAGAIN.

    ssh2-python's write goes on packet after packet and, stopped half-way through one, says EAGAIN with
    the bytes of the whole packets before it. libssh2 then finishes that packet whatever it is given, and
    counts it from where it is given: so each call starts where the last one stopped."""

    def __init__(self, data: memoryview, sending: Callable[[], bool] | None = None):
        self._data = data
        self._sending = sending  # given, done at the first bytes sent and no packet half sent (`send`)
        self.done = 0

    def __call__(self, chan: _LibChannel) -> int:
        code, written = chan.write(bytes(self._data[self.done : self.done + 65536]))
        self.done += written
        if code != LIBSSH2_ERROR_EAGAIN or (self.done and self._sending and not self._sending()):
            return 0
        return code


class _Status:
    """`status_event` as paramiko's Channel has it: set once the command's exit status came."""

    def __init__(self, chan: LibChannel):
        self._chan = chan

    def wait(self, timeout: float | None = None) -> bool:
        return self._chan.wait_closed_by_peer(timeout)


class LibChannel:
    """A libssh2 channel with the part of paramiko's Channel interface rke-py uses."""

    def __init__(self, session: LibSession, chan: _LibChannel):
        self._session = session
        self._chan: _LibChannel | None = chan
        self._timeout: float | None = None
        self._out = bytearray()
        self._err = bytearray()
        self._eof = False
        self._peer_closed = False
        self._cut = False  # ended by a lost connection
        self.status_event = _Status(self)

    # state

    @property
    def closed(self) -> bool:
        return self._chan is None or not self._session.is_active()

    @property
    def _closed(self) -> bool:  # what paramiko's Transport asks of the channel it runs over (a bastion's)
        return self.closed

    @property
    def eof_received(self) -> bool:
        return self._eof

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout

    def _deadline(self, timeout: float | None = -1.0) -> float | None:
        timeout = self._timeout if timeout == -1.0 else timeout
        return None if timeout is None else time.monotonic() + timeout

    def _call(
        self,
        op: Callable[[_LibChannel], T],
        deadline: float | None,
        *,
        request: bool = False,
        ready: Callable[[], bool] | None = None,
    ) -> T:
        """`op(channel)`, unless this side closed the channel: sshd drops the whole connection for a
        message naming a channel it has freed."""

        def guarded() -> T:
            if self._chan is None:
                raise OSError("the channel is closed")
            return op(self._chan)

        try:
            if request:
                return self._session.request(guarded, deadline)
            return self._session.call(guarded, deadline, ready)
        except lib.SSH2Error:
            raise OSError(f"SSH channel: {self._session.failure()}") from None

    # commands

    def exec_command(self, command: str) -> None:
        try:
            self._call(lambda c: c.execute(command), self._deadline(None), request=True)
        except OSError as e:
            raise paramiko.SSHException(str(e)) from None

    def recv_exit_status(self) -> int:
        """The command's exit status; -1 without one (killed by a signal, or the connection went)."""
        self.wait_closed_by_peer(None)
        chan = self._chan
        if chan is None or self._cut:
            return -1
        signal = self._session.under_lock(chan.get_exit_signal)
        if signal[1]:
            return -1  # killed by a signal: no status, as paramiko reports it
        return self._session.under_lock(chan.get_exit_status)

    def wait_closed_by_peer(self, timeout: float | None) -> bool:
        """The server sent its close (after the exit status), within `timeout`."""
        if self._peer_closed or self._cut:
            return True
        deadline = self._deadline(timeout)
        try:
            while not self._eof:  # libssh2 waits for the close only after the end of the output
                self._fill(deadline)
            if not self._cut:
                self._call(lambda c: c.wait_closed(), deadline)
        except TimeoutError:
            return False
        except OSError:  # closed here, or the connection went: no status will come
            self._cut = True
        self._peer_closed = True
        return True

    # data

    def _fill(self, deadline: float | None) -> None:
        """Read what the channel has (stdout and stderr), waiting until something comes or it ends."""

        def read(c: _LibChannel) -> int:
            got = False
            for stream, into in ((c.read, self._out), (c.read_stderr, self._err)):
                code, data = stream(65536)
                if code > 0:
                    into += data
                    got = True
                elif code == LIBSSH2_ERROR_EAGAIN and self._session.sending():
                    return code  # a window adjustment half sent: to be finished before anything else
            if got:
                return 1
            if c.eof():
                self._eof = True
                return 0
            return LIBSSH2_ERROR_EAGAIN

        try:
            self._call(read, deadline, ready=self._readable)
        except Lost:  # as paramiko has it: the channel ends, without an exit status
            self._eof = self._cut = True

    def _readable(self) -> bool:
        """libssh2 holds output or the end for this channel (asked under the session's lock; no I/O)."""
        c = self._chan
        return c is None or bool(c.poll_channel_read(1)) or bool(c.eof())

    def _ready(self) -> None:
        """What has come already, without waiting."""
        with contextlib.suppress(TimeoutError):
            self._fill(time.monotonic())

    def recv_ready(self) -> bool:
        if not self._out and not self._eof:
            self._ready()
        return bool(self._out)

    def recv_stderr_ready(self) -> bool:
        if not self._err and not self._eof:
            self._ready()
        return bool(self._err)

    def wait_readable(self, timeout: float) -> None:
        """Until output, the end, or `timeout` (for reading stdout and stderr together)."""
        if self._out or self._err or self._eof:
            return
        with contextlib.suppress(TimeoutError):
            self._fill(time.monotonic() + timeout)

    def take(self) -> tuple[bytes, bytes]:
        """The stdout and stderr read so far, without asking libssh2 again: a reader that has just waited
        (`wait_readable`) has what came, and another look for each stream is one more call a packet."""
        return self._take(self._out, len(self._out)), self._take(self._err, len(self._err))

    def recv(self, n: int) -> bytes:
        deadline = self._deadline()
        while not self._out and not self._eof:
            self._fill(deadline)
        return self._take(self._out, n)

    def recv_stderr(self, n: int) -> bytes:
        if not self._err:
            self._ready()
        return self._take(self._err, n)

    @staticmethod
    def _take(buf: bytearray, n: int) -> bytes:
        data = bytes(buf[:n])
        del buf[:n]
        return data

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        deadline = self._deadline()
        while view:
            writer = _Writer(view)
            self._call(writer, deadline)
            view = view[writer.done :]

    def send(self, data: bytes) -> int:
        """Some of `data` (paramiko's Transport sends so over a bastion's channel)."""
        writer = _Writer(memoryview(data), self._session.sending)
        self._call(writer, self._deadline())
        return writer.done

    def get_transport(self) -> LibSession:
        return self._session

    def shutdown_write(self) -> None:
        self._call(lambda c: c.send_eof(), self._deadline())

    def close(self) -> None:
        """Close, and free libssh2's channel under the lock (its memory is the session's)."""
        if self._chan is None:
            return
        with contextlib.suppress(OSError, TimeoutError):
            self._call(lambda c: c.close(), self._deadline(5))
        self._session.under_lock(self._forget)

    def __del__(self) -> None:
        if self._chan is not None:
            self._session.drop(self._chan)

    def _forget(self) -> None:
        self._chan = None
        self._session.wake_all()  # a thread waiting to read it (paramiko's, over a bastion) ends now
