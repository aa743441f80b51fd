"""The uploader while its cloud cannot be reached."""

from __future__ import annotations

import asyncio
import gc
import socket
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.store.db import Database
from agent.store.identity_replica import IdentityReplicaStore
from agent.sync.link import CloudLink
from agent.sync.outbox import OutboxStore
from agent.sync.outbox_rows import Selection
from agent.sync.replica import IdentityReplica
from agent.sync.uploader import SyncPolicy, Uploader
from protocol.tokens import TokenVerifier
from tests.support.reading_seed import add_device, add_farm, add_readings, add_series, add_user


def _closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_no_batch_is_held_while_the_cloud_is_away(db: Database, tmp_path: Path) -> None:
    # An outage lasts hours; a batch the cloud never received is taken again when it is back,
    # so the memory of the failed one (up to 25,000 rows and its body) must not wait with it.
    farm = await add_farm(db, await add_user(db))
    device = await add_device(db, farm)
    series_id = await add_series(db, device)
    await add_readings(db, series_id, [1_700_000_000_000 + i * 10_000 for i in range(100)], 6.5)
    link = CloudLink(f"http://127.0.0.1:{_closed_port()}", "agent-1", "cloud", "")
    replica = IdentityReplica(IdentityReplicaStore(db), TokenVerifier(), link, tmp_path)
    uploader = Uploader(link, Ed25519PrivateKey.generate(), OutboxStore(db), replica, SyncPolicy())
    batches_held: list[int] = []
    waiting = asyncio.Event()

    async def cloud_never_back(delay: float) -> None:
        gc.collect()
        batches_held.append(sum(isinstance(o, Selection) for o in gc.get_objects()))
        waiting.set()
        await asyncio.Event().wait()

    uploader._probe_until_reachable = cloud_never_back  # type: ignore[method-assign]
    task = asyncio.create_task(uploader.run())
    try:
        await waiting.wait()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert uploader.status.failures == 1
    assert batches_held == [0]
