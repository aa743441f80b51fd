"""An agent reduced to what the cloud sees of it: an Ed25519 key paired through the real API,
one farm with its sensors, and signed, gzipped batches built with protocol/sync.py exactly as the
agent's uploader builds them. For tests and benchmarks that need many agents (a fleet) without
running many agent processes.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from protocol.sync import (
    AGENT_HEADER,
    SIGNATURE_HEADER,
    Batch,
    Lane,
    ReadingBlock,
    Record,
    encode_batch,
    encode_readings,
)

__all__ = ["BATCHES_PATH", "SignedBatch", "SimAgent"]

BATCHES_PATH = "/api/v1/sync/batches"
_STAMP = "2024-01-01T00:00:00.000Z"


@dataclass(frozen=True)
class SignedBatch:
    """A batch as it goes on the wire: gzip body and signature header, and what it holds."""

    agent_id: str
    body: bytes
    signature: str
    readings: int
    last_seq: int

    def headers(self) -> dict[str, str]:
        """The headers the cloud verifies the body with."""
        return {
            AGENT_HEADER: self.agent_id,
            SIGNATURE_HEADER: self.signature,
            "Content-Type": "application/octet-stream",
        }


@dataclass
class SimAgent:
    """One simulated agent; numbers its records like the agent's outbox (from 1, no gaps)."""

    agent_id: str
    key: Ed25519PrivateKey
    farm_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    device_ids: list[str] = field(default_factory=list)
    seq: int = 0
    identity_version: int = 0
    """The identity version of the last delta the cloud answered, sent with every batch as the
    agent sends its replica's: the cloud answers a delta only when it has a newer one."""

    @staticmethod
    def public_key_of(key: Ed25519PrivateKey) -> str:
        """The raw public key, base64url without padding (the pairing request's form)."""
        raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    async def pair(cls, session: aiohttp.ClientSession, base_url: str, code: str) -> SimAgent:
        """Redeem a pairing code through POST /api/v1/agents/pair."""
        key = Ed25519PrivateKey.generate()
        async with session.post(
            f"{base_url}/api/v1/agents/pair",
            json={"code": code, "public_key": cls.public_key_of(key)},
        ) as resp:
            body: dict[str, Any] = await resp.json()
            assert resp.status == 200, body
        return cls(agent_id=body["agent_id"], key=key)

    def _next(self, kind: str, key: str, data: dict[str, Any], lane: Lane) -> Record:
        self.seq += 1
        return Record(seq=self.seq, lane=lane, kind=kind, op="upsert", key=key, data=data)

    def record(self, kind: str, key: str, data: dict[str, Any]) -> Record:
        """The next upsert of ``kind`` (priority lane), numbered like the agent's outbox."""
        return self._next(kind, key, data, Lane.PRIORITY)

    def sign(self, records: Sequence[Record], readings: int = 0) -> SignedBatch:
        """Sign ``records`` as one batch, accounting for exactly their numbers."""
        batch = Batch(
            agent_id=self.agent_id,
            sent_at=int(time.time() * 1000),
            records=tuple(records),
            ranges=tuple((r.seq - 1, r.seq) for r in records),
            identity_version=self.identity_version,
        )
        body, signature = encode_batch(batch, self.key)
        last = max((r.seq for r in records), default=self.seq)
        return SignedBatch(self.agent_id, body, signature, readings, last)

    def farm_records(self, devices: int) -> list[Record]:
        """The farm and ``devices`` temperature sensors on it, as the agent's outbox sends them."""
        records = [
            self._next(
                "farms",
                self.farm_id,
                {"id": self.farm_id, "name": f"Farm {self.agent_id[:8]}", "status": "active",
                 "created_at": _STAMP, "updated_at": _STAMP},
                Lane.PRIORITY,
            )
        ]  # fmt: skip
        for n in range(devices):
            device_id = str(uuid.uuid4())
            self.device_ids.append(device_id)
            records.append(
                self._next(
                    "devices",
                    device_id,
                    {"id": device_id, "farm_id": self.farm_id, "name": f"Sensor {n}",
                     "kind": "sensor", "device_type": "temperature_humidity",
                     "created_at": _STAMP, "updated_at": _STAMP},
                    Lane.PRIORITY,
                )
            )  # fmt: skip
        return records

    def reading_records(self, start_ms: int, per_device: int, step_ms: int) -> list[Record]:
        """One block per device: ``per_device`` temperatures ``step_ms`` apart from ``start_ms``."""
        records = []
        for n, device_id in enumerate(self.device_ids):
            stamps = [start_ms + i * step_ms for i in range(per_device)]
            values = [20.0 + ((n + i) % 50) / 10 for i in range(per_device)]
            data = encode_readings(ReadingBlock(device_id, "temperature", stamps, values))
            data["u"] = "C"
            records.append(self._next("readings", f"{device_id}:temperature", data, Lane.BULK))
        return records

    async def post(
        self, session: aiohttp.ClientSession, base_url: str, batch: SignedBatch
    ) -> tuple[int, dict[str, Any]]:
        """POST a signed batch; the status and the JSON answer (an identity delta in it is
        held from then on, as the agent's replica holds it)."""
        async with session.post(
            base_url + BATCHES_PATH, data=batch.body, headers=batch.headers()
        ) as resp:
            answer: dict[str, Any] = await resp.json()
        if resp.status == 200 and answer.get("identity"):
            self.identity_version = max(self.identity_version, int(answer["identity"]["version"]))
        return resp.status, answer
