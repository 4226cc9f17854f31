"""What rke-py does when an apiserver does not answer a request: a busy one is asked again with backoff
for a bound (--api-timeout), a refusing one fails the call at once, and the message names the call, the
apiservers and how long it tried."""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import socket
import ssl
import threading
import time

import pytest

from rke_py.deploy import session  # noqa: F401  (imported first: kube.api alone starts an import cycle)
from rke_py.kube import api as kube_api
from rke_py.kube.api import REQUEST_TIMEOUT, KubeAPI, KubeAPIError
from rke_py.pki.certs import make_ca, make_signed

SERVERS = ["10.0.0.1:6443", "10.0.0.2:6443"]
CA = make_ca("kube-ca")


def _api(dial, timeout: float = REQUEST_TIMEOUT, patience: float = 30) -> KubeAPI:
    return KubeAPI(SERVERS, CA, CA, dial, timeout, patience)


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch):
    monkeypatch.setattr(kube_api, "BACKOFF", (0.01, 0.02))


class BusyAPI:
    """An apiserver at the far end of every dialled socket pair, speaking TLS with a certificate for the
    addresses the client checks: each answer in `answers` in turn ("slow": none within the client's
    timeout; a number: that HTTP status with an etcd timeout's words), then 200 with the node list."""

    def __init__(self, tmp_path, answers: list[str | int]):
        leaf = make_signed(
            "kube-apiserver", CA, "kube-apiserver", server=True, ips=[ipaddress.ip_address("10.0.0.1")]
        )
        cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
        cert.write_text(leaf.cert_pem)
        key.write_text(leaf.key_pem)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.answers = list(answers)
        self.asked: list[str] = []

    def dial(self, host: str, port: int) -> socket.socket:
        if host != "10.0.0.1":
            raise ConnectionRefusedError(111, "Connection refused")
        ours, theirs = socket.socketpair()
        threading.Thread(target=self._serve, args=(theirs,), daemon=True).start()
        return ours

    def _serve(self, raw: socket.socket) -> None:
        with self.context.wrap_socket(raw, server_side=True) as tls:
            request = b""
            while b"\r\n\r\n" not in request:
                request += tls.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            length = next(
                (
                    int(x.split(b":")[1])
                    for x in head.split(b"\r\n")
                    if x.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(body) < length:
                body += tls.recv(65536)
            self.asked.append(head.split(b" ", 2)[1].decode())
            answer = self.answers.pop(0) if self.answers else 200
            if answer == "slow":
                time.sleep(0.5)
                return
            body = json.dumps(
                {"items": []} if answer == 200 else {"message": "etcdserver: request timed out"}
            ).encode()
            tls.sendall(
                f"HTTP/1.1 {answer} X\r\nContent-Length: {len(body)}\r\nContent-Type: application/json\r\n"
                "Connection: close\r\n\r\n".encode()
                + body
            )


def test_a_busy_apiserver_is_asked_again_until_it_answers(tmp_path, caplog):
    server = BusyAPI(tmp_path, ["slow", 503, 429, 500, 504, "slow"])
    with caplog.at_level(logging.INFO, logger="rke_py"):
        assert _api(server.dial, timeout=0.2).get("/api/v1/nodes") == {"items": []}
    assert server.asked == ["/api/v1/nodes"] * 7
    retries = [r.getMessage() for r in caplog.records if "asking again" in r.getMessage()]
    assert len(retries) == 6
    assert retries[0].startswith("GET /api/v1/nodes: the apiserver is busy (10.0.0.1:6443: no answer within")
    assert "HTTP 503: etcdserver: request timed out" in retries[1]


def test_a_busy_apiserver_fails_the_call_once_the_bound_is_spent_naming_call_servers_and_time(tmp_path):
    server = BusyAPI(tmp_path, [503] * 1000)
    started = time.monotonic()
    with pytest.raises(KubeAPIError) as info:
        _api(server.dial, patience=0.5).apply("/api/v1/namespaces/kube-system/secrets/x?dryRun=All", {})
    assert time.monotonic() - started < 1.5
    message = str(info.value)
    said = re.escape(
        "PATCH /api/v1/namespaces/kube-system/secrets/x: no apiserver answered "
        f"(10.0.0.1:6443, 10.0.0.2:6443); asked {len(server.asked)} times in "
    )
    # the seconds as spent, rounded: under a busy CI machine's load the half-second bound reads "1 s"
    cause = re.escape("10.0.0.1:6443: HTTP 503: etcdserver: request timed out")
    assert re.match(said + r"[01] s: " + cause, message), message
    assert len(server.asked) > 3


@pytest.mark.parametrize("status", [403, 404, 409, 422])
def test_an_answer_that_says_no_is_not_asked_again(tmp_path, status):
    server = BusyAPI(tmp_path, [status])
    with pytest.raises(KubeAPIError) as info:
        _api(server.dial).get("/api/v1/nodes")
    assert info.value.status == status
    assert server.asked == ["/api/v1/nodes"]


def test_an_apiserver_that_does_not_answer_in_time_is_named_with_the_wait():
    """A channel that never answers the TLS handshake: its read times out with no message of its own."""
    silent: list[socket.socket] = []

    def dial(host, port):
        ours, theirs = socket.socketpair()
        silent.append(theirs)
        return ours

    with pytest.raises(KubeAPIError) as info:
        _api(dial, timeout=0.2, patience=0).get("/api/v1/nodes")
    assert str(info.value) == (
        "GET /api/v1/nodes: no apiserver answered (10.0.0.1:6443, 10.0.0.2:6443); asked 1 times in 0 s: "
        "10.0.0.2:6443: no answer to the TLS handshake within 0.2 s"
    )


def test_a_refused_connection_fails_at_once_and_keeps_its_reason():
    dialled = []

    def dial(host, port):
        dialled.append(host)
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(KubeAPIError, match=r"\): \[Errno 111\] Connection refused$"):
        _api(dial).get("/api/v1/nodes")
    assert dialled == ["10.0.0.1", "10.0.0.2"]


class KeptAPI(BusyAPI):
    """An apiserver that keeps each connection open for further requests, as kube-apiserver does, and
    lets one go after `lets_go_after` answers without a word (an idle connection closed)."""

    def __init__(self, tmp_path, lets_go_after: int = 0):
        super().__init__(tmp_path, [])
        self.dialled = 0
        self.lets_go_after = lets_go_after

    def dial(self, host: str, port: int) -> socket.socket:
        self.dialled += 1
        return super().dial(host, port)

    def _serve(self, raw: socket.socket) -> None:
        with self.context.wrap_socket(raw, server_side=True) as tls, tls.makefile("rb") as requests:
            answered = 0
            while not self.lets_go_after or answered < self.lets_go_after:
                line = requests.readline()
                if not line:
                    return
                length = 0
                while (header := requests.readline()) not in (b"\r\n", b""):
                    if header.lower().startswith(b"content-length:"):
                        length = int(header.split(b":")[1])
                requests.read(length)
                self.asked.append(line.split(b" ")[1].decode())
                body = json.dumps({"items": []}).encode()
                tls.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
                answered += 1


def test_requests_to_one_apiserver_share_one_connection_while_it_stays_open(tmp_path):
    server = KeptAPI(tmp_path)
    api = _api(server.dial)
    for _ in range(3):
        assert api.get("/api/v1/nodes") == {"items": []}
    api.apply("/api/v1/namespaces/kube-system/configmaps/x", {"data": {}})
    assert server.dialled == 1
    assert len(server.asked) == 4


def test_a_kept_connection_the_apiserver_let_go_is_replaced_without_failing_the_request(tmp_path):
    server = KeptAPI(tmp_path, lets_go_after=1)
    api = _api(server.dial)
    for _ in range(3):
        assert api.get("/api/v1/nodes") == {"items": []}
    assert server.asked == ["/api/v1/nodes"] * 3
    assert server.dialled == 3


def test_an_answer_that_closes_its_connection_is_not_kept(tmp_path):
    server = BusyAPI(tmp_path, [200, 200])  # each answer says "Connection: close"
    dialled = []

    def dial(host, port):
        dialled.append(host)
        return server.dial(host, port)

    api = _api(dial)
    assert api.get("/api/v1/nodes") == api.get("/api/v1/nodes") == {"items": []}
    assert dialled == ["10.0.0.1", "10.0.0.1"]
