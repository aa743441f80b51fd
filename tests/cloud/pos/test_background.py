"""The POS background work stops when asked, whatever its loops are doing at that moment."""

from __future__ import annotations

import asyncio
import os

import aiohttp

from cloud.pos_provider.client import RetryPolicy
from cloud.services.pos import PosBackground, PosSecrets, PosWorkPolicy, ProviderLinks
from cloud.services.pos.links import ProviderUrls
from cloud.store.db import Database
from farmkit.secretbox import SecretBox


async def test_stop_ends_the_loops_even_when_a_wake_up_comes_with_it(database: Database) -> None:
    # An event stored just before shutdown wakes the applier in the same turn of the event loop
    # as the cancellation; Python 3.11's wait_for then returns the wake-up and drops the
    # cancellation, and a stop that cancelled only once waited for ever.
    async with aiohttp.ClientSession() as session:
        nowhere = ProviderUrls("http://127.0.0.1:9", "http://127.0.0.1:9")
        links = ProviderLinks(session, nowhere, RetryPolicy())
        secrets = PosSecrets(SecretBox(os.urandom(32)))
        for _ in range(5):
            background = PosBackground(
                database, secrets, links, PosWorkPolicy(poll_s=30.0, schedule_interval_s=0)
            )
            background.start()
            await asyncio.sleep(0.3)  # every loop found nothing to do and waits for a wake-up
            background.wake_events()
            background.wake()
            # The bound only keeps a hang from blocking the suite; a stop takes milliseconds.
            await asyncio.wait_for(background.stop(), 20)
