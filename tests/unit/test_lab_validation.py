"""The stand-in apiserver refuses a Secret the real one refuses: more than 1 MiB of keys and values."""

import base64

from rke_py.lab.kube import validation


def secret(size: int) -> dict:
    value = base64.b64encode(b"x" * (size - len("state"))).decode()
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"state": value}}


def test_a_secret_of_one_mib_is_accepted_and_one_byte_more_is_refused():
    assert validation.problems("Secret", secret(1024 * 1024)) == []
    assert validation.problems("Secret", secret(1024 * 1024 + 1)) == [
        "data: Too long: must have at most 1048576 bytes"
    ]
