"""The agent's Ed25519 token-signing key, kept in its state directory."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocol.tokens import private_key_pem

__all__ = ["load_or_create_signing_key"]


def load_or_create_signing_key(path: Path) -> Ed25519PrivateKey:
    """Load the key, or create it readable by the service user only."""
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{path}: not an Ed25519 private key")
        return key
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
