"""HTTP(S) servers shared by the components: threaded, HTTP/1.1 keep-alive, TLS handshake per thread."""

import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from rke_py.lab.kube import log

_HANDSHAKE_TIMEOUT = 10.0
_IDLE_TIMEOUT = 120.0


class Server(ThreadingHTTPServer):
    """A ThreadingHTTPServer that, given a TLS context, does each handshake in the request's thread."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.tls = tls
        super().__init__(address, handler)

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        super().server_bind()

    def get_request(self) -> tuple[socket.socket, object]:
        sock, addr = self.socket.accept()
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def finish_request(self, request: socket.socket, client_address: object) -> None:
        if isinstance(request, ssl.SSLSocket):
            request.settimeout(_HANDSHAKE_TIMEOUT)
            try:
                request.do_handshake()
            except (OSError, ssl.SSLError) as exc:
                # Go's net/http logs these the same way and carries on.
                log.info(f"http: TLS handshake error from {client_address[0]}: {exc}")
                return
        request.settimeout(_IDLE_TIMEOUT)
        super().finish_request(request, client_address)

    def handle_error(self, request: object, client_address: object) -> None:
        log.warning(f"connection from {client_address[0]} ended with an error")


class Handler(BaseHTTPRequestHandler):
    """Base handler: HTTP/1.1, explicit Content-Length, no per-request access log."""

    protocol_version = "HTTP/1.1"
    server_version = "lab"
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def start(
    address: tuple[str, int], handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None
) -> Server:
    """Bind now (so a taken port is a fatal error at start) and serve in a daemon thread."""
    try:
        server = Server(address, handler, tls)
    except OSError as exc:
        log.fatal(f"failed to listen on {address[0]}:{address[1]}: {exc}")
    threading.Thread(target=server.serve_forever, name=f"serve-{address[1]}", daemon=True).start()
    return server


def health_handler(routes: dict[str, Callable[[], tuple[int, str]]]) -> type[Handler]:
    """A handler answering GET on each path with ``routes[path]()`` = (status, text)."""

    class HealthHandler(Handler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path not in routes:
                self.send(404, b"404 page not found\n")
                return
            status, text = routes[path]()
            self.send(status, text.encode())

        do_HEAD = do_GET

    return HealthHandler


def peer_identity(sock: ssl.SSLSocket) -> tuple[str, tuple[str, ...]] | None:
    """(user, groups) of a verified client certificate: CN and O, as Kubernetes reads them; None
    without one. Every authenticated user is also in group system:authenticated."""
    cert = sock.getpeercert()
    if not cert:
        return None
    cn, groups = "", []
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                cn = value
            elif key == "organizationName":
                groups.append(value)
    return cn, (*groups, "system:authenticated")


def split_host_port(value: str, default_port: int) -> tuple[str, int]:
    """``ip``, ``ip:port`` or ``[v6]:port``; a missing port takes ``default_port`` (as kube-proxy does)."""
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    if value.count(":") == 1:
        host, port = value.split(":")
        return host or "0.0.0.0", int(port)
    return value, default_port
