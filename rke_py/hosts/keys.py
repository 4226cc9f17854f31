"""Private keys for SSH: loaded once per run, passphrase asked at most once per key.

A run may open a hundred connections with the same key; parsing it (and asking for its passphrase) once
keeps connects cheap and the prompt single. Messages name the key's path, never its content.
"""

from __future__ import annotations

import functools
import getpass
import io
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import paramiko
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

PASSPHRASE_ENV = "RKE_PY_SSH_PASSPHRASE"
NOT_A_KEY_HINT = "Please check if the configured key or specified key file is a valid SSH Private Key"


class KeyProblem(Exception):
    """A key could not be used; the message is safe to show (path and reason, no key material)."""


def expand_home(path: str) -> str:
    """Expand a leading `~/` only, as RKE does (`~user/` and `$VARS` stay literal)."""
    return str(Path.home() / path[2:]) if path.startswith("~/") else path


def _tty_prompt(label: str) -> str | None:
    if not sys.stdin.isatty():
        return None
    return getpass.getpass(f"Passphrase for SSH key {label}: ")


class KeyLoader:
    """Parses private keys, memoised by path (files) or by content (inline `ssh_key`)."""

    def __init__(
        self,
        *,
        env: dict[str, str] | os._Environ[str] = os.environ,
        prompt: Callable[[str], str | None] = _tty_prompt,
    ):
        self._env = env
        self._prompt = prompt
        self._lock = threading.Lock()
        self._cache: dict[str, paramiko.PKey] = {}

    def from_file(self, path: str) -> paramiko.PKey:
        """The key at `path` (leading `~/` expanded)."""
        path = expand_home(path)
        with self._lock:
            if path not in self._cache:
                try:
                    data = Path(path).read_bytes()
                except FileNotFoundError:
                    raise KeyProblem(f"SSH key file {path} does not exist. {NOT_A_KEY_HINT}") from None
                except IsADirectoryError:
                    raise KeyProblem(f"SSH key file {path} is a directory. {NOT_A_KEY_HINT}") from None
                except OSError as e:
                    raise KeyProblem(f"cannot read SSH key file {path}: {e.strerror}") from None
                self._cache[path] = self._parse(data, path)
            return self._cache[path]

    def from_text(self, text: str, label: str = "ssh_key") -> paramiko.PKey:
        """A key given inline in cluster.yml (`ssh_key`); `label` names it in messages."""
        with self._lock:
            cache_key = "inline:" + text
            if cache_key not in self._cache:
                self._cache[cache_key] = self._parse(text.encode(), label)
            return self._cache[cache_key]

    def _parse(self, data: bytes, label: str) -> paramiko.PKey:
        try:
            return _load(data, None, label)
        except TypeError:  # encrypted, no password given
            pass
        passphrase = self._env.get(PASSPHRASE_ENV)
        source = f"from {PASSPHRASE_ENV}"
        if passphrase is None:
            passphrase = self._prompt(label)
            source = "entered"
        if passphrase is None:
            raise KeyProblem(
                f"SSH key {label} is encrypted and no passphrase is available: set {PASSPHRASE_ENV}, "
                "run rke-py in a terminal to be asked for it, or load the key into ssh-agent and set "
                "ssh_agent_auth: true"
            )
        try:
            return _load(data, passphrase.encode(), label)
        except (ValueError, TypeError):
            raise KeyProblem(f"wrong passphrase for SSH key {label} (passphrase {source})") from None


def _load(data: bytes, password: bytes | None, label: str) -> paramiko.PKey:
    """Parse with `cryptography` (OpenSSH or PEM format), then wrap in the matching paramiko class.

    Raises TypeError when the key is encrypted and `password` is None, ValueError for a wrong password.
    """
    openssh = b"-----BEGIN OPENSSH PRIVATE KEY-----" in data
    loader = serialization.load_ssh_private_key if openssh else serialization.load_pem_private_key
    try:
        key = loader(data, password)
    except ValueError:
        if password is not None:
            raise
        raise KeyProblem(f"{label} is not an SSH private key. {NOT_A_KEY_HINT}") from None
    except UnsupportedAlgorithm as e:
        raise KeyProblem(f"{label}: unsupported SSH private key ({e}). {NOT_A_KEY_HINT}") from None
    if isinstance(key, rsa.RSAPrivateKey):
        return paramiko.RSAKey(key=key)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return paramiko.ECDSAKey(vals=(key, key.public_key()))
    if isinstance(key, ed25519.Ed25519PrivateKey):
        # paramiko builds Ed25519 keys only from OpenSSH text; re-serialise in memory.
        text = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        return paramiko.Ed25519Key(file_obj=io.StringIO(text.decode()))
    raise KeyProblem(f"{label}: unsupported key type {type(key).__name__}. {NOT_A_KEY_HINT}")


@functools.lru_cache(maxsize=8)
def openssh_private(key: paramiko.PKey) -> bytes:
    """`key` in OpenSSH's private format, unencrypted, for libssh2 (which takes keys from memory so, and
    no paramiko object): kept in memory only, once per key for the run (each login used to encode it
    again, some 0.1 ms)."""
    inner: Any
    if isinstance(key, paramiko.RSAKey):
        inner = key.key
    elif isinstance(key, paramiko.ECDSAKey):
        inner = key.signing_key
    elif isinstance(key, paramiko.Ed25519Key):
        inner = ed25519.Ed25519PrivateKey.from_private_bytes(bytes(cast(Any, key)._signing_key)[:32])
    else:
        raise KeyProblem(f"unsupported key type {key.get_name()}")
    return cast(
        bytes,
        inner.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        ),
    )
