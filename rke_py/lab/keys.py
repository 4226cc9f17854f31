"""The lab's SSH key pair and the known_hosts file that lets clients check host keys strictly."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def write_private(path: Path, data: bytes) -> None:
    """Write a secret 0600 from the first byte on (never briefly world-readable)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def ensure_key(path: Path, comment: str) -> str:
    """Create an ed25519 key at `path` (OpenSSH format, 0600) unless one exists; return the public line."""
    if path.exists():
        key = serialization.load_ssh_private_key(path.read_bytes(), password=None)
    else:
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        write_private(path, pem)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    line = f"{public.decode()} {comment}\n"
    path.with_name(path.name + ".pub").write_text(line)
    return line


def known_hosts_lines(address: str, host_keys: str) -> list[str]:
    """known_hosts lines for `address` from the host's `ssh_host_*_key.pub` files (`type base64 comment`)."""
    lines = []
    for pub in host_keys.splitlines():
        fields = pub.split()
        if len(fields) >= 2:
            lines.append(f"{address} {fields[0]} {fields[1]}")
    return lines
