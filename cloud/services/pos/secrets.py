"""A configuration's secrets, sealed with AES-256-GCM under the operator's key and bound to the
configuration's id (a sealed token copied into another row does not open)."""

from __future__ import annotations

from uuid import UUID

from farmkit.secretbox import SecretBox

__all__ = ["PosSecrets"]


class PosSecrets:
    """Seals and opens the access token and the webhook signature key."""

    def __init__(self, box: SecretBox) -> None:
        self._box = box

    def seal(self, config_id: UUID, name: str, value: str) -> bytes:
        """Encrypt ``value`` as secret ``name`` of the configuration."""
        return self._box.seal(value, f"pos_configs:{config_id}:{name}")

    def open(self, config_id: UUID, name: str, sealed: bytes) -> str:
        """Decrypt what :meth:`seal` produced (``SecretBoxError`` under another key)."""
        return self._box.open(sealed, f"pos_configs:{config_id}:{name}")
