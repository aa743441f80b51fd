"""The sync wire format: signed gzip batches and compact reading blocks."""

from __future__ import annotations

import gzip
import random
import uuid

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from protocol.sync import (
    MAX_BATCH_BYTES,
    Ack,
    Batch,
    BatchRejected,
    Lane,
    ReadingBlock,
    Record,
    RollupBlock,
    decode_batch,
    decode_readings,
    decode_rollups,
    encode_batch,
    encode_readings,
    encode_rollups,
)

KEY = Ed25519PrivateKey.generate()


def batch(*records: Record) -> Batch:
    return Batch(agent_id="agent-1", sent_at=1_800_000_000_000, records=records)


def farm(seq: int) -> Record:
    return Record(
        seq=seq, lane=Lane.PRIORITY, kind="farm", op="upsert", key=f"f{seq}", data={"name": "North"}
    )


def test_a_signed_batch_round_trips() -> None:
    body, signature = encode_batch(batch(farm(1), farm(2)), KEY)
    decoded = decode_batch(body, signature, KEY.public_key())
    assert [r.seq for r in decoded.records] == [1, 2]
    assert decoded.records[0].data == {"name": "North"}


def test_a_tampered_body_is_refused() -> None:
    body, signature = encode_batch(batch(farm(1)), KEY)
    raw = bytearray(gzip.decompress(body))
    raw[raw.index(b"North")] = ord("S")
    with pytest.raises(BatchRejected, match="signature"):
        decode_batch(gzip.compress(bytes(raw)), signature, KEY.public_key())


def test_another_agents_key_is_refused() -> None:
    body, signature = encode_batch(batch(farm(1)), Ed25519PrivateKey.generate())
    with pytest.raises(BatchRejected, match="signature"):
        decode_batch(body, signature, KEY.public_key())


def test_a_gzip_bomb_is_refused_before_it_is_inflated() -> None:
    bomb = gzip.compress(b'{"agent_id": "' + b"a" * (MAX_BATCH_BYTES + 10) + b'"}')
    signature = __import__("base64").b64encode(KEY.sign(bomb)).decode()
    with pytest.raises(BatchRejected, match="too large"):
        decode_batch(bomb, signature, KEY.public_key())


def test_a_signed_but_malformed_batch_is_refused() -> None:
    body = gzip.compress(b'{"agent_id": "a", "records": "nope"}')
    signature = __import__("base64").b64encode(KEY.sign(body)).decode()
    with pytest.raises(BatchRejected, match="invalid batch"):
        decode_batch(body, signature, KEY.public_key())


def test_reading_blocks_round_trip_exactly_at_sensor_precision() -> None:
    rng = random.Random(7)
    stamps = [1_800_000_000_000 + i * 1000 + rng.randint(0, 30) for i in range(500)]
    values = [round(21 + rng.random() * 3, 2) for _ in stamps]
    block = decode_readings(encode_readings(ReadingBlock("d1", "temperature", stamps, values)))
    assert list(block.timestamps_ms) == stamps
    assert list(block.values) == values


def test_reading_blocks_are_a_few_bytes_per_reading_on_the_wire() -> None:
    rng = random.Random(3)
    records = []
    for seq in range(1, 51):
        stamps = [1_800_000_000_000 + i * 1000 for i in range(200)]
        values = [round(20 + rng.gauss(0, 0.3), 1) for _ in stamps]
        data = encode_readings(ReadingBlock(f"device-{seq}", "temperature", stamps, values))
        records.append(
            Record(seq=seq, lane=Lane.BULK, kind="readings", op="upsert", key=f"b{seq}", data=data)
        )
    body, _ = encode_batch(batch(*records), KEY)
    assert len(body) / (50 * 200) <= 12


def test_malformed_reading_blocks_are_refused() -> None:
    with pytest.raises(BatchRejected):
        decode_readings({"device_id": "d", "metric": "m", "t0": 1, "dt": [1, 2], "p": 1, "v": [1]})
    with pytest.raises(BatchRejected):
        decode_readings({"device_id": "d"})


def test_rollup_blocks_round_trip_and_malformed_ones_are_refused() -> None:
    block = RollupBlock(str(uuid.uuid4()), "co2", "ppm", "1m", [3, 9], [60_000, 120_000],
                        [400.0, 410.0], [500.0, 520.0], [2700.0, 2790.0], [6, 6])  # fmt: skip
    assert decode_rollups(encode_rollups(block)) == block
    for broken in ({"w": "1d"}, {"n": [6]}, {"n": [0, 6]}, {"device_id": "nope"}):
        with pytest.raises(BatchRejected):
            decode_rollups({**encode_rollups(block), **broken})


def test_an_ack_from_a_newer_cloud_still_parses() -> None:
    ack = Ack.model_validate({"acked_seq": 7, "something_new": True})
    assert ack.acked_seq == 7
