"""The cloud's sealing key as the agent knows it: what a contact point's URL is sealed to before
it enters the sync outbox, so that only the cloud opens it (farmkit/sealing.py).

The key is fetched from the cloud once paired, trusted only if the cloud's token key (from
pairing) signed it, and kept in the link file. Until then contact points wait: when the key
becomes known, those who asked (the notification store) queue every contact point again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

from agent.sync.link import CloudLink
from farmkit.backoff import Backoff
from farmkit.sealing import (
    SealingKeyRejected,
    public_key_from_text,
    seal_to,
    verified_sealing_key,
)
from protocol.schemas.agents import SealingKey

__all__ = ["CloudSealing"]

log = logging.getLogger(__name__)

_TIMEOUT_S = 30.0


class CloudSealing:
    """Seals secrets for the cloud; :meth:`fetch` learns the key from the cloud."""

    def __init__(self, link: CloudLink | None) -> None:
        self._key: X25519PublicKey | None = None
        self._learned: list[Callable[[], Awaitable[object]]] = []
        if link is not None and link.cloud_sealing_key is not None:
            try:
                self._key = public_key_from_text(link.cloud_sealing_key)
            except ValueError:
                log.warning("the cloud sealing key in the link is malformed: fetching it again")

    @property
    def known(self) -> bool:
        """Whether secrets can be sealed for the cloud yet."""
        return self._key is not None

    def seal(self, plaintext: str, context: str) -> str | None:
        """``plaintext`` sealed to the cloud, bound to ``context``; None while the key is
        unknown."""
        return None if self._key is None else seal_to(self._key, plaintext, context)

    def when_learned(self, work: Callable[[], Awaitable[object]]) -> None:
        """Run ``work`` once the key becomes known (not when it was known at start)."""
        self._learned.append(work)

    async def fetch(self, link: CloudLink, state_dir: Path, backoff: Backoff) -> None:
        """Fetch the key until the cloud answers with one its token key signed; keep it in the
        link file and tell those waiting. Nothing to do when it is known."""
        attempt = 0
        while self._key is None:
            try:
                key = await _fetch(link)
            except (aiohttp.ClientError, TimeoutError, ValueError, SealingKeyRejected) as err:
                delay = backoff.delay(attempt)
                attempt += 1
                log.warning("cloud sealing key not fetched (%s); again in %.1f s", err, delay)
                await asyncio.sleep(delay)
                continue
            dataclasses.replace(link, cloud_sealing_key=key).save(state_dir)
            self._key = public_key_from_text(key)
            log.info("cloud sealing key kept: contact points go to the cloud sealed")
            for work in self._learned:
                try:
                    await work()
                except Exception:
                    log.exception("after learning the cloud sealing key")


async def _fetch(link: CloudLink) -> str:
    """The cloud's sealing key, verified against its token key."""
    url = link.cloud_url.rstrip("/") + "/api/v1/agents/sealing-key"
    timeout = aiohttp.ClientTimeout(total=_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as resp:
        body = await resp.read()
        if resp.status != 200:
            raise ValueError(f"cloud answered {resp.status}")
    answer = SealingKey.model_validate_json(body)
    verified_sealing_key(answer.key, answer.signature, link.cloud_key)
    return answer.key
