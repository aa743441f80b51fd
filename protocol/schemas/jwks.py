"""The published token-verification keys: a JWK Set (RFC 7517 section 5) of Ed25519 keys."""

from __future__ import annotations

from typing import Literal

from protocol.schemas.common import Schema

__all__ = ["Jwk", "JwkSet"]


class Jwk(Schema):
    """An Ed25519 public key for EdDSA signatures (RFC 8037 section 2)."""

    kty: Literal["OKP"]
    crv: Literal["Ed25519"]
    x: str
    kid: str
    alg: Literal["EdDSA"]
    use: Literal["sig"]


class JwkSet(Schema):
    """GET /.well-known/jwks.json."""

    keys: list[Jwk]
