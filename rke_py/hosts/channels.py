"""Byte streams that start on the node: Unix-socket channels, and HTTP(S) over SSH channels.

Health checks must run *from the node* (RKE fetches `https://localhost:6443/healthz` through its SSH
dialer), and the Docker socket lives on the node; both ride the host's one SSH transport.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import os
import secrets
import ssl
import tempfile
import threading
from typing import TYPE_CHECKING, Any, TypeAlias, cast
from urllib.parse import urlsplit

import paramiko
from cryptography.hazmat.primitives import serialization
from paramiko.common import cMSG_CHANNEL_OPEN
from paramiko.message import Message

if TYPE_CHECKING:
    from rke_py.hosts.libssh2 import LibChannel

STREAMLOCAL = "direct-streamlocal@openssh.com"
# A byte stream to or from the node: paramiko's, or libssh2's shaped like it.
Channel: TypeAlias = "paramiko.Channel | LibChannel"


class HTTPProblem(Exception):
    """The peer did not speak HTTP (or TLS) as expected."""


class NoAnswer(HTTPProblem):
    """The peer took the connection but gave no whole answer in time: busy, or going away."""


class Broken(NoAnswer):
    """The server closed a new connection without answering: going away (to the API, as busy as no answer;
    to Docker, the connection broke)."""


class ChannelTimeout(paramiko.SSHException):
    """sshd did not answer a channel request in time: the host is busy (a connection that is lost shows as
    a transport no longer active instead)."""


def open_streamlocal(transport: paramiko.Transport, path: str, *, timeout: float = 10) -> paramiko.Channel:
    """Open OpenSSH's `direct-streamlocal@openssh.com` channel: the server connects to its Unix socket `path`.

    paramiko has no API for it (paramiko#544), so this sends the CHANNEL_OPEN the way
    `Transport.open_channel` does, with the body OpenSSH expects (PROTOCOL, 2.4): socket path, a reserved
    string and a reserved uint32. Raises paramiko.ChannelException when refused: code 1 "administratively
    prohibited" (AllowStreamLocalForwarding no) or 2 "connect failed" (no socket, or no permission).
    """
    if not transport.is_active():
        raise paramiko.SSHException("SSH session not active")
    t: Any = transport  # the private parts of paramiko that Transport.open_channel uses
    with t.lock:
        window_size = t._sanitize_window_size(None)
        max_packet_size = t._sanitize_packet_size(None)
        chanid = t._next_channel()
        m = Message()
        m.add_byte(cMSG_CHANNEL_OPEN)
        m.add_string(STREAMLOCAL)
        m.add_int(chanid)
        m.add_int(window_size)
        m.add_int(max_packet_size)
        m.add_string(path)
        m.add_string("")
        m.add_int(0)
        chan = paramiko.Channel(chanid)
        c: Any = chan
        t._channels.put(chanid, chan)
        t.channel_events[chanid] = event = threading.Event()
        t.channels_seen[chanid] = True
        c._set_transport(transport)
        c._set_window(window_size, max_packet_size)
    t._send_user_message(m)
    if not event.wait(timeout):
        raise ChannelTimeout(f"timed out after {timeout:g}s opening a channel to {path}")
    opened = t._channels.get(chanid)
    if opened is not None:
        return opened
    raise transport.get_exception() or paramiko.SSHException(f"cannot open a channel to {path}")


def split_url(url: str) -> tuple[str, int, str]:
    """(host, port, path?query) of an http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.hostname, port, path


_contexts: dict[str, ssl.SSLContext] = {}
_contexts_lock = threading.Lock()


def tls_context(ca_pem: bytes | None, cert_pem: bytes | None, key_pem: bytes | None) -> ssl.SSLContext:
    """A client TLS context, built once per distinct (CA, client cert, key).

    With `ca_pem` the server's certificate and host name are verified against it; without, nothing is
    verified (a health check against a not-yet-trusted endpoint, as RKE's checks do).
    `ssl` loads client keys only from files: the key is written re-encrypted with a random one-time
    password into a fresh 0700 directory as a 0600 file, loaded, and deleted at once, so it never touches
    the disk in the clear.
    """
    digest = hashlib.sha256(b"\0".join(x or b"" for x in (ca_pem, cert_pem, key_pem))).hexdigest()
    with _contexts_lock:
        if digest in _contexts:
            return _contexts[digest]
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if ca_pem:
            ctx.load_verify_locations(cadata=ca_pem.decode())
        else:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if cert_pem and key_pem:
            _load_client_pair(ctx, cert_pem, key_pem)
        _contexts[digest] = ctx
        return ctx


def _load_client_pair(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    password = secrets.token_bytes(32)
    # Without RSA's full validation (some 35 ms a key, for each client identity a run uses): OpenSSL checks
    # that the key is the certificate's when it loads the pair, and the key comes from the cluster's state.
    key = serialization.load_pem_private_key(key_pem, None, unsafe_skip_rsa_key_validation=True)
    sealed = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password),
    )
    with tempfile.TemporaryDirectory(prefix="rke-py-tls-") as d:  # mkdtemp makes it 0700
        cert_file, key_file = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        for name, data in ((cert_file, cert_pem), (key_file, sealed)):
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(cert_file, key_file, password=password)


class _Stream(io.RawIOBase):
    """A readable raw stream over something with recv(), for http.client's makefile()."""

    def __init__(self, recv):
        self._recv = recv

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self._recv(len(b))
        b[: len(data)] = data
        return len(data)


class TLSSessions:
    """The last TLS session each server on one node gave, to resume on the next connection to it.

    A probe repeated while a component starts is a new connection each time, and a full handshake costs
    the client a key exchange, the parse of the server's certificates and, for a client identity, a
    signature; a resumed TLS 1.3 session costs the key exchange alone. A server that restarted, or
    another one behind a proxy, refuses the ticket and the handshake is a full one. Kept per context, so
    a session is resumed only with the client identity and the trust it was made with. What is kept is
    the connection's TLS object, asked for its session only when one is resumed: taking the session out
    costs a tenth of a handshake, and a run that probes each server once (a no-op) resumes none."""

    def __init__(self) -> None:
        self._kept: dict[tuple[ssl.SSLContext, str, int], ssl.SSLObject] = {}
        self._lock = threading.Lock()

    def get(self, ctx: ssl.SSLContext, host: str, port: int) -> ssl.SSLSession | None:
        with self._lock:
            last = self._kept.get((ctx, host, port))
        session = last.session if last is not None else None
        return session if session is not None and session.has_ticket else None

    def keep(self, ctx: ssl.SSLContext, host: str, port: int, tls: ssl.SSLObject) -> None:
        """After an answer was read over `tls` (TLS 1.3 servers send their tickets after the handshake)."""
        with self._lock:
            self._kept[ctx, host, port] = tls


class _TLSChannel:
    """TLS over an SSH channel with ssl's memory BIOs: no socket, no thread, no extra file descriptor."""

    def __init__(
        self, chan: Channel, ctx: ssl.SSLContext, server_hostname: str, session: ssl.SSLSession | None = None
    ):
        self._chan = chan
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = ctx.wrap_bio(
            self._incoming, self._outgoing, server_hostname=server_hostname, session=session
        )
        self._pump(self._tls.do_handshake)

    @property
    def tls(self) -> ssl.SSLObject:
        """The TLS state, for `TLSSessions.keep`."""
        return self._tls

    @property
    def resumed(self) -> bool:
        return self._tls.session_reused

    def _pump(self, op, *args):
        while True:
            try:
                result = op(*args)
            except ssl.SSLWantReadError:
                self._flush()
                data = self._chan.recv(65536)
                if data:
                    self._incoming.write(data)
                else:
                    self._incoming.write_eof()
                continue
            self._flush()
            return result

    def _flush(self) -> None:
        data = self._outgoing.read()
        if data:
            self._chan.sendall(data)

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self._pump(self._tls.write, view) :]

    def recv(self, n: int) -> bytes:
        try:
            return self._pump(self._tls.read, n)
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return b""

    def makefile(self, mode: str = "rb", *args, **kwargs):
        return io.BufferedReader(_Stream(self.recv))

    def close(self) -> None:
        """Left to http_request: http.client closes its socket as soon as a `Connection: close` response's
        headers are read, relying on the response's file to keep a real socket open for the body."""


class _PlainChannel:
    def __init__(self, chan: Channel):
        self._chan = chan

    def sendall(self, data: bytes) -> None:
        self._chan.sendall(data)

    def makefile(self, mode: str = "rb", *args, **kwargs):
        return io.BufferedReader(_Stream(self._chan.recv))

    def close(self) -> None:
        """Left to http_request, as for _TLSChannel."""


def peer_certificate(chan: Channel, host: str, timeout: float) -> bytes:
    """The DER certificate the server at the other end of `chan` presents, trusted or not: what a port
    serves is what matters for its expiry, whoever signed it (a kubelet signs its own by default)."""
    chan.settimeout(timeout)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        return _TLSChannel(chan, context, host)._tls.getpeercert(binary_form=True) or b""
    except ssl.SSLError as e:
        raise HTTPProblem(f"TLS handshake failed: {e.reason or e}") from None
    finally:
        chan.close()


class Stale(HTTPProblem):
    """A kept connection the server closed without answering: servers close idle ones, which a new request
    can cross, so the request goes again on a new connection. What rke-py asks bears that: reads, applies,
    and creations and evictions that take "already exists" and "gone" as done."""


class HTTPConnection:
    """HTTP (TLS when `context` is given) over one open channel. A request asked with `keep` leaves it
    open when the server allows (`reusable`): the next request to the same server then costs no channel,
    no TLS handshake and no client signature, the bulk of a small request's CPU."""

    def __init__(
        self,
        chan: Channel,
        host: str,
        port: int,
        context: ssl.SSLContext | None,
        timeout: float | None,
        sessions: TLSSessions | None = None,
    ):
        self._chan = chan
        self._resume = sessions
        chan.settimeout(timeout)
        try:
            if context is None:
                sock: _TLSChannel | _PlainChannel = _PlainChannel(chan)
            else:
                kept = sessions.get(context, host, port) if sessions else None
                sock = _TLSChannel(chan, context, host, kept)
        except BaseException as e:  # the channel is this object's to close from the start
            chan.close()
            if isinstance(e, ssl.SSLError):
                raise HTTPProblem(f"TLS handshake failed: {e.reason or e}") from None
            if isinstance(e, TimeoutError):  # paramiko's says nothing
                raise NoAnswer(f"no answer to the TLS handshake within {timeout:g} s") from None
            raise
        self._http = http.client.HTTPConnection(host, port, timeout=timeout)
        self._http.sock = sock  # http.client only needs sendall() and makefile() from it
        self._tls = sock if isinstance(sock, _TLSChannel) else None
        self._server = (context, host, port)
        self.reusable = False
        self._asked = False

    def request(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        keep: bool = False,
    ) -> tuple[int, bytes]:
        """(status, body); raises HTTPProblem (NoAnswer when the server took the request and gave no whole
        answer in time, Stale on a kept connection the server had closed meanwhile)."""
        response, body = self.exchange(method, path, timeout=timeout, body=body, headers=headers, keep=keep)
        return response.status, body

    def exchange(
        self,
        method: str,
        path: str,
        *,
        timeout: float | None,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        keep: bool = False,
    ) -> tuple[http.client.HTTPResponse, bytes]:
        """As `request`, with the whole response (its reason and headers; the body already read)."""
        kept, self._asked, self.reusable = self._asked, True, False
        self._chan.settimeout(timeout)
        headers = {**(headers or {}), **({} if keep else {"Connection": "close"})}
        try:
            self._http.request(method, path, body=body, headers=headers)
            response = self._http.getresponse()
            answer = response, response.read()
        except ssl.SSLError as e:
            raise HTTPProblem(f"TLS error: {e.reason or e}") from None
        except TimeoutError:
            raise NoAnswer(f"no answer within {timeout:g} s") from None
        except (http.client.RemoteDisconnected, OSError) as e:
            if kept:  # most likely an idle connection the server let go as the request went out
                raise Stale("the server closed the kept connection") from None
            if isinstance(e, http.client.RemoteDisconnected):
                raise Broken(f"bad HTTP response: {e!r}") from None
            raise
        except http.client.HTTPException as e:
            raise NoAnswer(f"bad HTTP response: {e!r}") from None
        # http.client forgets the socket of a response that closes; it must never dial one of its own
        self.reusable = keep and self._http.sock is not None and not response.will_close
        if self._resume is not None and self._tls is not None:
            context, host, port = self._server
            self._resume.keep(cast(ssl.SSLContext, context), host, port, self._tls.tls)
        return answer

    @property
    def resumed(self) -> bool:
        """The TLS handshake resumed a kept session."""
        return self._tls is not None and self._tls.resumed

    def closed_by_peer(self) -> bool:
        """The server hung up on this connection while it was idle (checked before it is used again)."""
        return bool(self._chan.closed or self._chan.eof_received)

    def close(self) -> None:
        self._http.close()
        self._chan.close()


def http_request(
    chan: Channel,
    host: str,
    port: int,
    path: str,
    *,
    context: ssl.SSLContext | None,
    timeout: float,
    sessions: TLSSessions | None = None,
) -> tuple[int, bytes]:
    """One GET over an open channel (TLS when `context` is given, resuming a session in `sessions`), which
    is closed after; (status, body)."""
    conn = HTTPConnection(chan, host, port, context, timeout, sessions)
    try:
        return conn.request("GET", path, timeout=timeout)
    finally:
        conn.close()
