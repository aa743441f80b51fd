"""Applies the identity delta of each ack: the replica tables, and trust in the cloud's key."""

from __future__ import annotations

import logging
from pathlib import Path

from agent.store.identity_replica import IdentityReplicaStore
from agent.sync.link import CloudLink
from protocol.sync import IdentityDelta
from protocol.tokens import TokenVerifier

__all__ = ["IdentityReplica", "trust_cloud"]

log = logging.getLogger(__name__)


def trust_cloud(verifier: TokenVerifier, state_dir: Path) -> CloudLink | None:
    """Accept the paired cloud's tokens (verified offline with its key); the link, if paired."""
    link = CloudLink.load(state_dir)
    if link is not None:
        verifier.trust(link.cloud_issuer, link.cloud_key)
    return link


class IdentityReplica:
    """Keeps users, permissions, sessions and the cloud's token key as the cloud says."""

    def __init__(
        self, store: IdentityReplicaStore, verifier: TokenVerifier, link: CloudLink, state_dir: Path
    ) -> None:
        self._store = store
        self._verifier = verifier
        self._link = link
        self._state_dir = state_dir

    async def version(self) -> int:
        """The cloud's identity version the replica holds; batches tell the cloud."""
        return await self._store.version()

    async def apply(self, delta: IdentityDelta) -> None:
        """Write the delta if it is newer than the replica; follow a rotated cloud key."""
        if not await self._store.apply(delta):
            return
        if (delta.issuer, delta.public_key) != (
            self._link.cloud_issuer,
            self._link.cloud_public_key,
        ):
            self._link = CloudLink(
                self._link.cloud_url, self._link.agent_id, delta.issuer, delta.public_key
            )
            self._link.save(self._state_dir)
            log.info("cloud token key changed; now trusting %s", delta.issuer)
        self._verifier.trust(self._link.cloud_issuer, self._link.cloud_key)
