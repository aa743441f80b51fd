"""The cloud's public key as a JWK, as agents and clients read it (RFC 8037, RFC 7638)."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.jwk import key_id, public_jwk, public_key_from_jwk

# RFC 8037 appendix A.2 (the Ed25519 public key) and A.3 (its RFC 7638 thumbprint).
RFC_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def test_the_rfc_8037_key_round_trips_with_its_thumbprint_as_key_id() -> None:
    key = public_key_from_jwk({"kty": "OKP", "crv": "Ed25519", "x": RFC_X})
    assert key_id(key) == RFC_THUMBPRINT
    assert public_jwk(key) == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": RFC_X,
        "kid": RFC_THUMBPRINT,
        "alg": "EdDSA",
        "use": "sig",
    }


@pytest.mark.parametrize(
    "jwk",
    [
        {"kty": "RSA", "n": "AQAB", "e": "AQAB"},
        {"kty": "OKP", "crv": "X25519", "x": RFC_X},
        {"kty": "OKP", "crv": "Ed25519"},
        {"kty": "OKP", "crv": "Ed25519", "x": 5},
        {"kty": "OKP", "crv": "Ed25519", "x": RFC_X[:-4]},
    ],
)
def test_anything_but_an_ed25519_public_key_is_a_value_error(jwk: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        public_key_from_jwk(jwk)
