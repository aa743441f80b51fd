"""Secrets at rest: AES-GCM bound to their row, keys from settings, a file or the signing key."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from farmkit.secretbox import (
    SecretBox,
    SecretBoxError,
    derived_key,
    key_from_text,
    load_or_create_key,
    new_key_text,
)


def test_a_sealed_secret_opens_only_under_its_key_and_row() -> None:
    box = SecretBox(key_from_text(new_key_text(), "test"))
    sealed = box.seal("JBSWY3DPEHPK3PXP", "user-1")
    assert b"JBSWY3DP" not in sealed
    assert box.open(sealed, "user-1") == "JBSWY3DPEHPK3PXP"
    with pytest.raises(SecretBoxError):
        box.open(sealed, "user-2")
    with pytest.raises(SecretBoxError):
        SecretBox(key_from_text(new_key_text(), "other")).open(sealed, "user-1")


def test_the_key_file_is_created_private_and_then_reused(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "secret.key"
    key = load_or_create_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key(path) == key


def test_a_derived_key_is_stable_and_not_the_signing_key() -> None:
    signing = Ed25519PrivateKey.generate()
    assert derived_key(signing, "a") == derived_key(signing, "a") != derived_key(signing, "b")


def test_a_malformed_key_is_refused_with_its_source() -> None:
    with pytest.raises(ValueError, match="CLOUD_SECRET_KEY"):
        key_from_text("c2hvcnQ=", "CLOUD_SECRET_KEY")
