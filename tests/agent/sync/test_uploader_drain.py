"""The uploader draining a backlog: batches read in chunks and held as columns."""

from __future__ import annotations

import gc
import random
from collections import Counter
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent.store.db import Database
from agent.store.identity_replica import IdentityReplicaStore
from agent.sync.link import CloudLink
from agent.sync.outbox import OutboxStore
from agent.sync.outbox_rows import QueuedReading, QueuedRollup
from agent.sync.replica import IdentityReplica
from agent.sync.uploader import SyncPolicy, Uploader
from protocol.sync import ROLLUP_BLOCK, Ack, decode_batch, decode_readings, decode_rollups
from protocol.tokens import TokenVerifier
from tests.support.reading_seed import add_device, add_farm, add_readings, add_series, add_user

T0 = 1_700_000_000_000


async def test_a_drain_sends_every_row_once_and_holds_no_object_per_row(
    db: Database, tmp_path: Path
) -> None:
    # A backlog of hours is drained in batches of up to 25,000 rows, two at a time (the one
    # posted, the next prepared beside it): as an object per row they cost the agent tens of
    # megabytes on a Raspberry Pi. Here batches of 2,500 rows span several chunks of the
    # reads, mix rollups with readings that came out of time order, and are cut to the size
    # limit; the cloud must still get each row exactly once.
    rng = random.Random(7)
    farm = await add_farm(db, await add_user(db))
    keys: dict[int, str] = {}
    for n in range(3):
        device = await add_device(db, farm)
        for metric in ("ph", "ec"):
            series_id = await add_series(db, device, metric)
            keys[series_id] = f"{device}/{metric}"
            stamps = [T0 + i * 10_000 for i in range(2_000)]
            rng.shuffle(stamps)  # late readings: numbers do not follow time
            await add_readings(db, series_id, stamps, 0.25 * n)
    outbox = OutboxStore(db)
    await outbox.acknowledge(await outbox.take(100), 0, 0)  # the farm and its devices
    await outbox.roll_up_readings(4_000)  # the oldest readings became rollups
    queued = Counter(
        (keys[int(r[0])], int(r[1]), float(r[2]))
        for r in await db.fetch_all("SELECT series_id, ts, value FROM outbox_readings")
    )
    rollups = Counter(
        (int(r[0]), keys[int(r[1])], int(r[2]), float(r[3]), float(r[4]), float(r[5]), int(r[6]))
        for r in await db.fetch_all(
            "SELECT seq, series_id, ts, vmin, vmax, vsum, n FROM outbox_rollups"
        )
    )
    assert rollups and len(queued) > 3 * 2_500

    key = Ed25519PrivateKey.generate()
    link = CloudLink("http://127.0.0.1:9", "agent-1", "cloud", "")
    replica = IdentityReplica(IdentityReplicaStore(db), TokenVerifier(), link, tmp_path)
    policy = SyncPolicy(batch_max_records=2_500)
    uploader = Uploader(link, key, outbox, replica, policy)
    sent: Counter[tuple[str, int, float]] = Counter()
    sent_rollups: Counter[tuple[int, str, int, float, float, float, int]] = Counter()
    objects_held: list[int] = []

    async def cloud(body: bytes, signature: str) -> Ack:
        gc.collect()
        objects_held.append(
            sum(isinstance(o, QueuedReading | QueuedRollup) for o in gc.get_objects())
        )
        for record in decode_batch(body, signature, key.public_key()).records:
            if record.kind == "readings":
                block = decode_readings(record.data)
                series = f"{block.device_id}/{block.metric}"
                sent.update(
                    (series, t, v) for t, v in zip(block.timestamps_ms, block.values, strict=True)
                )
            elif record.kind == ROLLUP_BLOCK:
                r = decode_rollups(record.data)
                series = f"{r.device_id}/{r.metric}"
                sent_rollups.update(
                    (s, series, t, lo, hi, total, n)
                    for s, t, lo, hi, total, n in zip(
                        r.seqs, r.buckets_ms, r.mins, r.maxes, r.sums, r.counts, strict=True
                    )
                )
        return Ack(acked_seq=0, max_batch_bytes=25_000)  # cut to fewer rows than taken

    uploader._post = cloud  # type: ignore[method-assign]
    while await uploader.step():
        pass
    await uploader._drop_next()
    await uploader.acknowledged()  # the last batch's, at a trickle, rides a later commit

    assert sent == queued
    assert sent_rollups == rollups
    assert await outbox.bulk_waiting() == 0
    assert len(objects_held) > 3 and set(objects_held) == {0}
