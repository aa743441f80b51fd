"""The cloud's Ed25519 token-signing key: from the environment or a key file."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cloud.settings import CloudSettings
from protocol.keyfile import load_or_create_private_key, private_key_from_pem

__all__ = ["signing_key"]


def signing_key(settings: CloudSettings) -> Ed25519PrivateKey:
    """CLOUD_SIGNING_KEY if set, else the file at CLOUD_SIGNING_KEY_PATH (created if missing).

    Several instances behind one address must share the key: set it for all of them rather
    than letting each create its own file.
    """
    if settings.signing_key is not None:
        pem = settings.signing_key.get_secret_value().encode()
        return private_key_from_pem(pem, "CLOUD_SIGNING_KEY")
    assert settings.signing_key_path is not None  # CloudSettings requires one of the two
    return load_or_create_private_key(settings.signing_key_path)
