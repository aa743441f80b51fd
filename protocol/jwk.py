"""Ed25519 public keys as JSON Web Keys (RFC 8037 section 2: kty OKP, crv Ed25519, x)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = ["key_id", "public_jwk", "public_key_from_jwk"]


def _b64url(data: bytes) -> str:
    # RFC 7515 section 2: base64url without padding.
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """The key's RFC 7638 thumbprint: SHA-256 of the required members in lexical order."""
    members = {"crv": "Ed25519", "kty": "OKP", "x": _b64url(_raw(key))}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode()
    return _b64url(hashlib.sha256(canonical).digest())


def public_jwk(key: Ed25519PublicKey) -> dict[str, str]:
    """The public JWK of ``key``, for signature verification with EdDSA."""
    return {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": _b64url(_raw(key)),
        "kid": key_id(key),
        "alg": "EdDSA",
        "use": "sig",
    }


def public_key_from_jwk(jwk: Mapping[str, Any]) -> Ed25519PublicKey:
    """The Ed25519 key of a JWK; ``ValueError`` for any other kind of key."""
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise ValueError("not an OKP Ed25519 key")
    x = jwk.get("x")
    if not isinstance(x, str):
        raise ValueError("missing x")
    raw = base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))
    if len(raw) != 32:  # RFC 8032 section 5.1.5: 32-byte public keys
        raise ValueError("x is not a 32-byte Ed25519 key")
    return Ed25519PublicKey.from_public_bytes(raw)
