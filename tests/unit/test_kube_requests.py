"""What rke-py says when no apiserver answers a request."""

from __future__ import annotations

import socket

import pytest

from rke_py.deploy import session  # noqa: F401  (imported first: kube.api alone starts an import cycle)
from rke_py.kube.api import REQUEST_TIMEOUT, KubeAPI, KubeAPIError
from rke_py.pki.certs import make_ca


def _api(dial, timeout: float = REQUEST_TIMEOUT) -> KubeAPI:
    ca = make_ca("kube-ca")  # the client's TLS context needs a CA and a certificate
    return KubeAPI(["10.0.0.1:6443", "10.0.0.2:6443"], ca, ca, dial, timeout)


def test_an_apiserver_that_does_not_answer_in_time_is_named_with_the_wait():
    """A channel that never answers the TLS handshake: its read times out with no message of its own."""
    silent: list[socket.socket] = []

    def dial(host, port):
        ours, theirs = socket.socketpair()
        silent.append(theirs)
        return ours

    with pytest.raises(KubeAPIError) as info:
        _api(dial, timeout=0.2).get("/api/v1/nodes")
    assert str(info.value) == (
        "no apiserver answered (10.0.0.1:6443, 10.0.0.2:6443): no answer to the TLS handshake within 0.2 s"
    )


def test_a_refused_connection_keeps_its_reason():
    def dial(host, port):
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(KubeAPIError, match=r"\): \[Errno 111\] Connection refused$"):
        _api(dial).get("/api/v1/nodes")
