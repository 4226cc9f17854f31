"""Host-key policies, pins from the cluster state and OpenSSH known_hosts files (no network)."""

from __future__ import annotations

import io
import logging

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from rke_py.hosts.hostkeys import HostKeyPolicy, HostKeyRejected, HostKeyStore, fingerprint


def _key() -> paramiko.PKey:
    text = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    return paramiko.Ed25519Key(file_obj=io.StringIO(text.decode()))


def _shown(key: paramiko.PKey) -> tuple[str, str]:
    """What a server shows: its key's type and base64 blob."""
    return key.get_name(), key.get_base64()


def _line(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.get_base64()}"


SERVER = _key()
OTHER = _key()


def test_fingerprint_matches_openssh_format():
    assert fingerprint(SERVER.get_base64()) == SERVER.fingerprint
    assert SERVER.fingerprint.startswith("SHA256:")
    assert not SERVER.fingerprint.endswith("=")


def test_accept_new_records_an_unknown_host():
    store = HostKeyStore()
    store.check("10.0.0.1", 22, *_shown(SERVER), HostKeyPolicy.ACCEPT_NEW)
    assert store.learned == {"10.0.0.1:22": _line(SERVER)}
    store.check(
        "10.0.0.1", 22, *_shown(SERVER), HostKeyPolicy.STRICT
    )  # learnt keys count as known for the run


def test_a_pinned_key_is_accepted_and_nothing_is_learnt():
    store = HostKeyStore(pinned={"10.0.0.1:2222": _line(SERVER)})
    store.check("10.0.0.1", 2222, *_shown(SERVER), HostKeyPolicy.STRICT)
    assert store.learned == {}


def test_pins_are_per_port():
    store = HostKeyStore(pinned={"10.0.0.1:2222": _line(SERVER)})
    with pytest.raises(HostKeyRejected, match=r"host key for 10\.0\.0\.1:22 is unknown"):
        store.check("10.0.0.1", 22, *_shown(SERVER), HostKeyPolicy.STRICT)


def test_strict_refuses_an_unknown_host_and_says_how_to_proceed():
    store = HostKeyStore()
    with pytest.raises(HostKeyRejected) as e:
        store.check("10.0.0.1", 22, *_shown(SERVER), HostKeyPolicy.STRICT)
    assert str(e.value) == (
        f"host key for 10.0.0.1:22 is unknown (ssh-ed25519 {SERVER.fingerprint}) and --host-key-policy is "
        'strict: add "10.0.0.1:22": "ssh-ed25519 <base64>" to rkePy.hostKeys in the cluster state or the key '
        "to the --known-hosts file, or run with --host-key-policy accept-new"
    )
    assert store.learned == {}


@pytest.mark.parametrize("policy", [HostKeyPolicy.ACCEPT_NEW, HostKeyPolicy.STRICT])
def test_a_changed_key_is_refused_with_both_fingerprints(policy):
    store = HostKeyStore(pinned={"10.0.0.1:22": _line(OTHER)})
    with pytest.raises(HostKeyRejected) as e:
        store.check("10.0.0.1", 22, *_shown(SERVER), policy)
    message = str(e.value)
    assert message.startswith(
        f"host key for 10.0.0.1:22 has changed: expected ssh-ed25519 {OTHER.fingerprint} "
        f"(from cluster state), the server offered ssh-ed25519 {SERVER.fingerprint}."
    )
    assert 'remove "10.0.0.1:22" from rkePy.hostKeys in the cluster state' in message
    assert "--host-key-policy ignore" in message
    assert store.learned == {}


def test_ignore_accepts_a_changed_key_with_a_warning_and_does_not_repin(caplog):
    store = HostKeyStore(pinned={"10.0.0.1:22": _line(OTHER)})
    with caplog.at_level(logging.WARNING):
        store.check("10.0.0.1", 22, *_shown(SERVER), HostKeyPolicy.IGNORE)
    assert f"10.0.0.1:22: host key ssh-ed25519 {SERVER.fingerprint} differs from the known key" in caplog.text
    assert store.learned == {}


def test_a_garbled_pin_is_reported_not_crashed_on():
    store = HostKeyStore(pinned={"10.0.0.1:22": "ssh-ed25519"})
    with pytest.raises(
        HostKeyRejected, match=r'rkePy.hostKeys entry for 10.0.0.1:22 is not "<keytype> <base64>"'
    ):
        store.check("10.0.0.1", 22, *_shown(SERVER), HostKeyPolicy.ACCEPT_NEW)


def test_known_hosts_file_with_port_hashed_and_marker_entries(tmp_path):
    hashed = paramiko.HostKeys.hash_host("[10.0.0.2]:2222")
    known = tmp_path / "known_hosts"
    known.write_text(
        "# a comment\n"
        f"10.0.0.1 {_line(SERVER)}\n"
        f"{hashed} {_line(OTHER)}\n"
        f"@cert-authority *.example {_line(OTHER)}\n"
    )
    store = HostKeyStore(known_hosts_file=str(known))
    store.check("10.0.0.1", 22, *_shown(SERVER), HostKeyPolicy.STRICT)
    store.check("10.0.0.2", 2222, *_shown(OTHER), HostKeyPolicy.STRICT)
    with pytest.raises(HostKeyRejected) as e:
        store.check("10.0.0.2", 2222, *_shown(SERVER), HostKeyPolicy.ACCEPT_NEW)
    assert f"(from {known})" in str(e.value)
    assert f"ssh-keygen -R '[10.0.0.2]:2222' -f {known}" in str(e.value)


def test_every_line_for_a_host_counts_as_openssh_counts_them(tmp_path):
    """A host listed twice (a key replaced, the old line kept): either key is accepted, plain or hashed."""
    known = tmp_path / "known_hosts"
    hashed = paramiko.HostKeys.hash_host("10.0.0.1")
    known.write_text(f"10.0.0.1 {_line(SERVER)}\n10.0.0.3 {_line(SERVER)}\n{hashed} {_line(OTHER)}\n")
    store = HostKeyStore(known_hosts_file=str(known))
    store.check("10.0.0.1", 22, *_shown(SERVER), HostKeyPolicy.STRICT)
    store.check("10.0.0.1", 22, *_shown(OTHER), HostKeyPolicy.STRICT)
    assert [k.b64 for k in store.known("10.0.0.1", 22)] == [SERVER.get_base64(), OTHER.get_base64()]
    with pytest.raises(HostKeyRejected, match="has changed"):
        store.check("10.0.0.3", 22, *_shown(OTHER), HostKeyPolicy.ACCEPT_NEW)


def test_a_revoked_key_is_refused(tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(f"@revoked * {_line(SERVER)}\n")
    store = HostKeyStore(known_hosts_file=str(known))
    with pytest.raises(HostKeyRejected, match=r"is marked @revoked in .*known_hosts"):
        store.check("10.0.0.1", 22, *_shown(SERVER), HostKeyPolicy.ACCEPT_NEW)
    store.check("10.0.0.1", 22, *_shown(OTHER), HostKeyPolicy.ACCEPT_NEW)
    assert store.learned == {"10.0.0.1:22": _line(OTHER)}


def test_missing_known_hosts_file_is_named(tmp_path):
    store = HostKeyStore(known_hosts_file=str(tmp_path / "nope"))
    with pytest.raises(HostKeyRejected, match=r"cannot read known_hosts file .*nope"):
        store.check("10.0.0.1", 22, *_shown(SERVER), HostKeyPolicy.ACCEPT_NEW)


def test_known_key_types_are_negotiated_first():
    available = ("ssh-ed25519", "ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")
    rsa_pin = HostKeyStore(pinned={"10.0.0.1:22": "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ=="})
    assert rsa_pin.preferred_algorithms("10.0.0.1", 22, available) == (
        "rsa-sha2-512",
        "rsa-sha2-256",
        "ssh-rsa",
        "ssh-ed25519",
        "ecdsa-sha2-nistp256",
    )
    assert HostKeyStore().preferred_algorithms("10.0.0.1", 22, available) == available


def test_a_client_that_cannot_be_shown_the_known_key_type_is_not_used():
    """libssh2 checks no DSA host keys: a host pinned with one logs in with paramiko instead."""
    libssh2 = ("ssh-ed25519", "rsa-sha2-512", "ssh-rsa")
    dss_pin = HostKeyStore(pinned={"10.0.0.1:22": "ssh-dss AAAAB3NzaC1kc3MAAACBAP=="})
    rsa_pin = HostKeyStore(pinned={"10.0.0.1:22": "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ=="})
    assert not dss_pin.checkable_with("10.0.0.1", 22, libssh2)
    assert rsa_pin.checkable_with("10.0.0.1", 22, libssh2)
    assert HostKeyStore().checkable_with("10.0.0.1", 22, libssh2)  # nothing known: any key is news
