"""Secrets encrypted at rest (the TOTP seed of MFA) with AES-256-GCM.

AES-GCM (NIST SP 800-38D) with a fresh random 96-bit nonce per message, stored in front of the
ciphertext. The associated data binds a ciphertext to its row (the user id), so a seed copied
into another user's row does not decrypt.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = [
    "KEY_BYTES",
    "SecretBox",
    "SecretBoxError",
    "derived_key",
    "key_from_text",
    "load_or_create_key",
    "new_key_text",
]

KEY_BYTES = 32
_NONCE_BYTES = 12  # the GCM nonce size that needs no extra hashing (SP 800-38D section 8.2)


class SecretBoxError(Exception):
    """A ciphertext does not decrypt under this key (wrong key, row or tampering)."""


def new_key_text() -> str:
    """A fresh key as URL-safe base64, the form settings and key files hold."""
    return base64.urlsafe_b64encode(os.urandom(KEY_BYTES)).decode()


def key_from_text(text: str, source: str) -> bytes:
    """Decode a base64 key of 32 bytes; ``source`` names it in the error."""
    try:
        key = base64.urlsafe_b64decode(text.strip().encode())
    except ValueError:
        raise ValueError(f"{source}: not base64") from None
    if len(key) != KEY_BYTES:
        raise ValueError(f"{source}: a key must be {KEY_BYTES} bytes, got {len(key)}")
    return key


def load_or_create_key(path: Path) -> bytes:
    """The key in the file at ``path``, or a new one written there with mode 0600 (temporary
    file, fsync, rename: a crash never leaves half a key)."""
    if path.exists():
        return key_from_text(path.read_text(), str(path))
    text = new_key_text()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return key_from_text(text, str(path))


def derived_key(signing_key: Ed25519PrivateKey, purpose: str) -> bytes:
    """A key for ``purpose`` derived from a service's signing key with HKDF (RFC 5869); the
    distinct ``info`` makes it independent of the signing key's own use."""
    raw = signing_key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    hkdf = HKDF(algorithm=SHA256(), length=KEY_BYTES, salt=None, info=purpose.encode())
    return hkdf.derive(raw)


class SecretBox:
    """Encrypts and decrypts small secrets under one key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"a key must be {KEY_BYTES} bytes")
        self._aead = AESGCM(key)

    def seal(self, plaintext: str, context: str) -> bytes:
        """Encrypt ``plaintext``, bound to ``context`` (e.g. the owning row's id)."""
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plaintext.encode(), context.encode())

    def open(self, sealed: bytes, context: str) -> str:
        """Decrypt what :meth:`seal` produced for the same ``context``."""
        nonce, ciphertext = sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:]
        try:
            return self._aead.decrypt(nonce, ciphertext, context.encode()).decode()
        except InvalidTag:
            raise SecretBoxError("secret does not decrypt under this key") from None
