"""Access tokens: JWT signed with Ed25519 (EdDSA), claims ``iss sub role sid jti iat exp``.

Opaque secrets (refresh tokens, API keys, one-time tokens) are random and stored as SHA-256
hashes; they are long enough (256 bits) that a fast hash is the right tool.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "AccessClaims",
    "InvalidToken",
    "TokenExpiredError",
    "TokenSigner",
    "TokenVerifier",
    "hash_secret",
    "new_secret",
]

ALGORITHM = "EdDSA"


class InvalidToken(Exception):
    """The token is malformed, badly signed, or from an unknown issuer."""


class TokenExpiredError(InvalidToken):
    """The token's ``exp`` has passed."""


@dataclass(frozen=True, slots=True)
class AccessClaims:
    """The verified claims of an access token."""

    issuer: str
    user_id: str
    role: str
    session_id: str
    token_id: str
    issued_at: int
    expires_at: int


def new_secret(prefix: str = "") -> str:
    """A fresh URL-safe secret with 256 bits of entropy."""
    return prefix + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """The stored form of an opaque secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    """PEM (PKCS#8, unencrypted) of a private key, for a file readable only by the service."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def public_key_pem(key: Ed25519PublicKey) -> bytes:
    """PEM (SubjectPublicKeyInfo) of a public key."""
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


class TokenSigner:
    """Issues access tokens with one issuer's private key."""

    def __init__(
        self,
        issuer: str,
        key: Ed25519PrivateKey,
        ttl_s: int = 3600,
        key_id: str | None = None,
    ) -> None:
        self.issuer = issuer
        self.ttl_s = ttl_s
        self.key_id = key_id
        self._key = key

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The key that verifies this signer's tokens."""
        return self._key.public_key()

    def issue(self, user_id: str, role: str, session_id: str, now: float | None = None) -> str:
        """A signed access token for a user's session."""
        issued = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": user_id,
            "role": role,
            "sid": session_id,
            "jti": str(uuid.uuid4()),
            "iat": issued,
            "exp": issued + self.ttl_s,
        }
        # A `kid` header lets a verifier holding a key set (JWKS) pick the key (RFC 7515 4.1.4).
        headers = {"kid": self.key_id} if self.key_id else None
        return jwt.encode(claims, self._key, algorithm=ALGORITHM, headers=headers)


class TokenVerifier:
    """Verifies access tokens from any of several trusted issuers (own key, cloud key)."""

    def __init__(
        self, trusted: dict[str, Ed25519PublicKey] | None = None, cache_size: int = 1024
    ) -> None:
        self._trusted: dict[str, Ed25519PublicKey] = dict(trusted or {})
        # Tokens whose signature already checked out: a client sends the same token on every
        # request for an hour, and the signature check is most of the cost of authenticating.
        # Only expiry still depends on time, and it is checked on every hit.
        self._verified: dict[str, AccessClaims] = {}
        self._cache_size = cache_size

    def trust(self, issuer: str, key: Ed25519PublicKey) -> None:
        """Accept tokens of ``issuer`` signed with ``key`` (replacing a previous key)."""
        self._trusted[issuer] = key
        self._verified.clear()  # a replaced key must not keep its tokens valid

    def verify(self, token: str, now: float | None = None) -> AccessClaims:
        """Check signature, issuer and expiry; return the claims."""
        current = time.time() if now is None else now
        known = self._verified.get(token)
        if known is not None:
            if known.expires_at <= current:
                del self._verified[token]
                raise TokenExpiredError("token expired")
            return known
        verified = self._verify_signed(token, current)
        if len(self._verified) >= self._cache_size:
            self._verified.clear()
        self._verified[token] = verified
        return verified

    def _verify_signed(self, token: str, current: float) -> AccessClaims:
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
            issuer = unverified.get("iss")
            key = self._trusted.get(issuer) if isinstance(issuer, str) else None
            if key is None:
                raise InvalidToken("unknown issuer")
            claims = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                issuer=issuer,
                options={
                    "require": ["iss", "sub", "role", "sid", "jti", "iat", "exp"],
                    "verify_exp": False,
                },
            )
        except jwt.PyJWTError as err:
            raise InvalidToken(str(err)) from err
        try:  # a signed token is still refused when its claims are not what we issue
            issued_at, expires_at = _epoch(claims["iat"]), _epoch(claims["exp"])
        except (TypeError, ValueError, OverflowError) as err:
            raise InvalidToken("iat and exp must be numbers") from err
        if expires_at <= current:
            raise TokenExpiredError("token expired")
        return AccessClaims(
            issuer=str(claims["iss"]),
            user_id=str(claims["sub"]),
            role=str(claims["role"]),
            session_id=str(claims["sid"]),
            token_id=str(claims["jti"]),
            issued_at=issued_at,
            expires_at=expires_at,
        )


def _epoch(value: object) -> int:
    """A NumericDate claim (RFC 7519 section 2) as whole seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"not a number: {value!r}")
    return int(value)
