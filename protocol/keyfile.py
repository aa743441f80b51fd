"""Ed25519 private keys kept in PEM files readable only by the service user."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocol.tokens import private_key_pem

__all__ = ["load_or_create_private_key", "private_key_from_pem"]


def private_key_from_pem(data: bytes, source: str) -> Ed25519PrivateKey:
    """Parse an unencrypted PEM private key; ``source`` names it in the error."""
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{source}: not a PEM private key ({err})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{source}: not an Ed25519 private key")
    return key


def load_or_create_private_key(path: Path) -> Ed25519PrivateKey:
    """Load the key at ``path``, or create it with mode 0600 (written to a temporary file,
    fsynced, then renamed, so a crash never leaves half a key)."""
    if path.exists():
        return private_key_from_pem(path.read_bytes(), str(path))
    key = Ed25519PrivateKey.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private_key_pem(key))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return key
