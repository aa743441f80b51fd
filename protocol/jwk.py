"""Ed25519 public keys as JSON Web Keys (RFC 8037 section 2: kty OKP, crv Ed25519, x).

PyJWT reads and writes the key members (``PyJWK``, ``OKPAlgorithm.to_jwk``); what it does not
offer is the RFC 7638 thumbprint the cloud uses as the key id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from jwt import PyJWK, PyJWTError
from jwt.algorithms import OKPAlgorithm
from jwt.utils import base64url_encode

__all__ = ["key_id", "public_jwk", "public_key_from_jwk"]

_MEMBERS = ("kty", "crv", "x")  # RFC 8037 section 2: the members of a public OKP key


def _members(key: Ed25519PublicKey) -> dict[str, str]:
    jwk = OKPAlgorithm.to_jwk(key, as_dict=True)
    return {name: str(jwk[name]) for name in _MEMBERS}


def key_id(key: Ed25519PublicKey) -> str:
    """The key's RFC 7638 thumbprint: SHA-256 of the required members in lexical order."""
    canonical = json.dumps(_members(key), separators=(",", ":"), sort_keys=True).encode()
    return base64url_encode(hashlib.sha256(canonical).digest()).decode("ascii")


def public_jwk(key: Ed25519PublicKey) -> dict[str, str]:
    """The public JWK of ``key``, for signature verification with EdDSA."""
    return {**_members(key), "kid": key_id(key), "alg": "EdDSA", "use": "sig"}


def public_key_from_jwk(jwk: Mapping[str, Any]) -> Ed25519PublicKey:
    """The Ed25519 key of a JWK (its public members only); ``ValueError`` for any other key."""
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise ValueError("not an OKP Ed25519 key")
    try:
        key = PyJWK({name: jwk.get(name) for name in _MEMBERS}, algorithm="EdDSA").key
    except (PyJWTError, TypeError) as err:
        raise ValueError(f"not a valid Ed25519 public key: {err}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key
