"""At a farm's trickle the uploader's acknowledgement waits to ride the next reading commit
(agent/sync/uploader.py): an agent that dies before that commit loses the acknowledgement only.
The cloud committed the batch; the rows stay in flight, are sent again unchanged and are taken
once by their numbers: every reading lands once, none is lost."""

from __future__ import annotations

import shutil
from pathlib import Path

import aiohttp

from agent.store.db import Database
from agent.store.identity_replica import IdentityReplicaStore
from agent.store.readings import NewReading, ReadingStore
from agent.sync.link import CloudLink, sync_key_path
from agent.sync.outbox import OutboxStore
from agent.sync.replica import IdentityReplica
from agent.sync.uploader import SyncPolicy, Uploader
from protocol.keyfile import load_or_create_private_key
from protocol.tokens import TokenVerifier
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import paired_state
from tests.e2e.test_sync_outage import T0, _seed_farm

# Caught up, an acknowledgement may wait as long as the uploader sleeps: an hour here, so only
# a reading commit (or the database's close) writes it.
POLICY = SyncPolicy(idle_interval_s=3600, heartbeat_s=3600, mark_ride_s=0.1)


def _uploader(state: Path, db: Database) -> tuple[Uploader, OutboxStore]:
    """The agent's uploader as the sync runtime builds it."""
    link = CloudLink.load(state)
    assert link is not None
    verifier = TokenVerifier()
    verifier.trust(link.cloud_issuer, link.cloud_key)
    replica = IdentityReplica(IdentityReplicaStore(db), verifier, link, state)
    key = load_or_create_private_key(sync_key_path(state))
    outbox = OutboxStore(db)
    return Uploader(link, key, outbox, replica, POLICY), outbox


async def _cloud_readings(cloud: LiveCloud) -> tuple[int, int]:
    rows = await cloud.sql("SELECT count(*), count(DISTINCT ts) FROM readings")
    return int(rows[0][0]), int(rows[0][1])


async def test_a_crash_before_a_riding_acknowledgement_commits_loses_and_doubles_nothing(
    cloud: LiveCloud, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    await paired_state(cloud, state)
    device_id = await _seed_farm(state)
    db = Database(state / "agent.db")
    await db.open()
    crashed = tmp_path / "crashed"
    try:
        store = ReadingStore(db, staged=True)
        uploader, _ = _uploader(state, db)
        async with aiohttp.ClientSession() as session:
            uploader._session = session  # run() owns it otherwise
            assert not await uploader.step()  # the farm and the device: one batch
            stamps = [T0 + i * 1000 for i in range(40)]
            await store.write([NewReading(device_id, "ph", "pH", ts, 6.5) for ts in stamps])
            # Caught up: the readings are marked (alone, after their short wait: no reading
            # commit comes), posted and committed by the cloud; the acknowledgement rides.
            assert not await uploader.step()
            assert await _cloud_readings(cloud) == (40, 40)
            # kill -9 now: what is on disk is what the agent finds at its next start (every
            # commit is in the WAL, fsynced; the acknowledgement is not).
            shutil.copytree(state, crashed)
    finally:
        await db.close()

    db = Database(crashed / "agent.db")
    await db.open()
    try:
        in_flight = await db.fetch_value(
            "SELECT count(*) FROM outbox_inflight AS i JOIN outbox_staged AS r"
            " ON r.seq > i.lo AND r.seq <= i.hi"
        )
        assert in_flight == 40, "the acknowledgement had not committed before the crash"
        uploader, outbox = _uploader(crashed, db)
        async with aiohttp.ClientSession() as session:
            uploader._session = session
            while await uploader.step():  # the rows in flight first, sent again unchanged
                pass
        await uploader.acknowledged()
        assert await outbox.bulk_waiting() == 0
        figures = await outbox.figures()
        assert figures.records == 0
    finally:
        await db.close()
    assert await _cloud_readings(cloud) == (40, 40)
