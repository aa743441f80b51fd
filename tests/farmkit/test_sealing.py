"""Secrets sealed to the cloud: only its sealing key opens them, for the row they were sealed
for, and an agent trusts a sealing key only if the cloud's token key signed it."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from farmkit.sealing import (
    SealingKeyRejected,
    open_sealed,
    public_key_text,
    seal_to,
    sealing_private_key,
    sign_sealing_key,
    verified_sealing_key,
)
from farmkit.secretbox import SecretBoxError

URL = "tgram://123456:token/-100200300"


def test_a_url_sealed_to_the_cloud_opens_only_with_its_key_and_for_its_row() -> None:
    cloud = Ed25519PrivateKey.generate()
    sealing = sealing_private_key(cloud)
    assert sealing_private_key(cloud).public_key() == sealing.public_key()  # every process
    sealed = seal_to(sealing.public_key(), URL, "contact-1")
    assert "token" not in sealed and seal_to(sealing.public_key(), URL, "contact-1") != sealed
    assert open_sealed(sealing, sealed, "contact-1") == URL
    with pytest.raises(SecretBoxError):
        open_sealed(sealing, sealed, "contact-2")
    with pytest.raises(SecretBoxError):
        open_sealed(sealing_private_key(Ed25519PrivateKey.generate()), sealed, "contact-1")
    with pytest.raises(SecretBoxError):
        open_sealed(sealing, sealed[:-4], "contact-1")


def test_a_sealing_key_is_trusted_only_when_signed_by_the_paired_clouds_key() -> None:
    cloud, impostor = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    public = sealing_private_key(cloud).public_key()
    key, signature = public_key_text(public), sign_sealing_key(cloud, public)
    assert verified_sealing_key(key, signature, cloud.public_key()) == public
    other = sealing_private_key(impostor).public_key()
    with pytest.raises(SealingKeyRejected):  # another key under the cloud's signature
        verified_sealing_key(public_key_text(other), signature, cloud.public_key())
    with pytest.raises(SealingKeyRejected):  # signed by someone else
        verified_sealing_key(
            public_key_text(other), sign_sealing_key(impostor, other), cloud.public_key()
        )
    with pytest.raises(SealingKeyRejected):
        verified_sealing_key("not a key", signature, cloud.public_key())
