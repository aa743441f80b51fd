"""Access tokens: verified offline, and a verification never outlives its key or its expiry."""

from __future__ import annotations

import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocol.tokens import InvalidToken, TokenExpiredError, TokenSigner, TokenVerifier


def _signer(issuer: str = "farm-agent") -> TokenSigner:
    return TokenSigner(issuer, Ed25519PrivateKey.generate(), ttl_s=60)


def test_a_token_verifies_with_its_claims() -> None:
    signer = _signer()
    verifier = TokenVerifier({signer.issuer: signer.public_key})
    claims = verifier.verify(signer.issue("user-1", "admin", "session-1"))
    assert (claims.user_id, claims.role, claims.session_id) == ("user-1", "admin", "session-1")
    assert claims.expires_at - claims.issued_at == 60


def test_a_verified_token_still_expires() -> None:
    signer = _signer()
    verifier = TokenVerifier({signer.issuer: signer.public_key})
    token = signer.issue("user-1", "user", "session-1")
    verifier.verify(token)  # now remembered as verified
    with pytest.raises(TokenExpiredError):
        verifier.verify(token, now=time.time() + 61)


def test_replacing_an_issuers_key_refuses_tokens_verified_before() -> None:
    old = _signer("cloud")
    verifier = TokenVerifier({"cloud": old.public_key})
    token = old.issue("user-1", "user", "session-1")
    verifier.verify(token)
    verifier.trust("cloud", _signer("cloud").public_key)
    with pytest.raises(InvalidToken):
        verifier.verify(token)


def test_tokens_of_unknown_issuers_and_tampered_tokens_are_refused() -> None:
    signer = _signer()
    verifier = TokenVerifier({"someone-else": signer.public_key})
    with pytest.raises(InvalidToken):
        verifier.verify(signer.issue("user-1", "user", "session-1"))
    verifier = TokenVerifier({signer.issuer: signer.public_key})
    head, body, signature = signer.issue("user-1", "user", "session-1").split(".")
    forged = f"{head}.{body}.{signature[:-4]}AAAA"
    with pytest.raises(InvalidToken):
        verifier.verify(forged)
