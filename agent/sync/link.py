"""The agent's link to its cloud, written at pairing: cloud URL, agent id, the cloud's token
issuer and key (and, once fetched, its sealing key); and the agent's own Ed25519 sync key, both
in the state directory."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from protocol.jwk import public_key_from_jwk

__all__ = ["CloudLink", "link_path", "sync_key_path"]


def link_path(state_dir: Path) -> Path:
    """Where the link is kept."""
    return state_dir / "cloud_link.json"


def sync_key_path(state_dir: Path) -> Path:
    """The agent's batch-signing key (distinct from its token-signing key)."""
    return state_dir / "sync_key.pem"


@dataclass(frozen=True)
class CloudLink:
    """A paired agent's view of its cloud."""

    cloud_url: str
    agent_id: str
    cloud_issuer: str
    cloud_public_key: str
    cloud_sealing_key: str | None = None
    """The cloud's X25519 key contact point URLs are sealed to, once fetched and verified."""

    @property
    def cloud_key(self) -> Ed25519PublicKey:
        """The key that verifies the cloud's access tokens."""
        return public_key_from_jwk({"kty": "OKP", "crv": "Ed25519", "x": self.cloud_public_key})

    @classmethod
    def load(cls, state_dir: Path) -> CloudLink | None:
        """The saved link, or ``None`` when the agent is not paired."""
        path = link_path(state_dir)
        if not path.exists():
            return None
        return cls(**json.loads(path.read_text(encoding="utf-8")))

    def save(self, state_dir: Path) -> None:
        """Write atomically (temporary file, fsync, rename)."""
        path = link_path(state_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(asdict(self), handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
