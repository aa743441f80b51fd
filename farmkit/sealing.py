"""Secrets sealed to a recipient's public key, so that only the holder of the private key opens
them: HPKE (RFC 9180) in base mode, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, as
the ``cryptography`` package implements it.

The agent seals a contact point's URL to the cloud's sealing key; the cloud derives that key
pair from its token-signing key (so every process behind one address holds the same one) and
signs the public half with the token key, which the agent already trusts from pairing.
"""

from __future__ import annotations

import base64

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.hpke import AEAD, KDF, KEM, Suite

from farmkit.secretbox import SecretBoxError, derived_key

__all__ = [
    "SealingKeyRejected",
    "open_sealed",
    "public_key_from_text",
    "public_key_text",
    "seal_to",
    "sealing_private_key",
    "sign_sealing_key",
    "verified_sealing_key",
]

_SUITE = Suite(KEM.X25519, KDF.HKDF_SHA256, AEAD.AES_128_GCM)
_PURPOSE = "farm-cloud sealing key"
# What the signature over a sealing key covers: this label, then the key's 32 raw bytes.
_STATEMENT = b"farm-cloud sealing key v1\x00"


class SealingKeyRejected(Exception):
    """A sealing key that is malformed or not signed by the expected key."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sealing_private_key(signing_key: Ed25519PrivateKey) -> X25519PrivateKey:
    """The sealing key pair derived from a signing key (HKDF with its own purpose)."""
    return X25519PrivateKey.from_private_bytes(derived_key(signing_key, _PURPOSE))


def _raw(public: X25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_key_text(public: X25519PublicKey) -> str:
    """A sealing public key as unpadded URL-safe base64 of its raw bytes."""
    return _b64(_raw(public))


def public_key_from_text(text: str) -> X25519PublicKey:
    """The sealing public key :func:`public_key_text` wrote (``ValueError`` if malformed)."""
    return X25519PublicKey.from_public_bytes(_unb64(text))


def sign_sealing_key(signing_key: Ed25519PrivateKey, public: X25519PublicKey) -> str:
    """The signing key's signature over a sealing public key (unpadded URL-safe base64)."""
    return _b64(signing_key.sign(_STATEMENT + _raw(public)))


def verified_sealing_key(key: str, signature: str, signer: Ed25519PublicKey) -> X25519PublicKey:
    """The sealing key ``key`` once ``signature`` by ``signer`` checks out."""
    try:
        raw = _unb64(key)
        public = X25519PublicKey.from_public_bytes(raw)
        signer.verify(_unb64(signature), _STATEMENT + raw)
    except (ValueError, InvalidSignature):
        raise SealingKeyRejected("sealing key malformed or not signed by the cloud") from None
    return public


def seal_to(public: X25519PublicKey, plaintext: str, context: str) -> str:
    """``plaintext`` sealed to ``public``, bound to ``context`` (e.g. the owning row's id)."""
    return _b64(_SUITE.encrypt(plaintext.encode(), public, info=context.encode()))


def open_sealed(private: X25519PrivateKey, sealed: str, context: str) -> str:
    """Open what :func:`seal_to` sealed to this key's public half for the same ``context``."""
    try:
        return _SUITE.decrypt(_unb64(sealed), private, info=context.encode()).decode()
    except (ValueError, InvalidTag):
        raise SecretBoxError("sealed secret does not open under this key") from None
