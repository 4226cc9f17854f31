"""How a shared libssh2 session knows that a call read the socket: the bytes taken from it, counted by
the kernel, so a thread waiting for a packet another call read is woken, not left to look again later."""

import socket

from rke_py.hosts.libssh2 import _bytes_taken


def test_the_bytes_taken_from_a_tcp_socket_are_counted_not_those_still_queued():
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
        with client, peer:
            assert _bytes_taken(client) == 0
            peer.sendall(b"x" * 1000)
            assert client.recv(300, socket.MSG_PEEK) == b"x" * 300  # arrived, not taken
            assert _bytes_taken(client) == 0
            client.recv(300)
            assert _bytes_taken(client) == 300
            rest = b""
            while len(rest) < 700:
                rest += client.recv(700 - len(rest))
            assert _bytes_taken(client) == 1000


def test_a_socket_the_system_cannot_count_for_says_so():
    left, right = socket.socketpair()  # not TCP: no tcp_info
    with left, right:
        assert _bytes_taken(left) is None
