"""The wire format of the WebSocket streams (docs/design.md section 7).

Client messages: ``auth`` (``token`` or ``api_key``), ``subscribe`` (``farm_id``, ``device_ids``,
``metrics``; each one replaces the previous filter) and ``ping``. Server messages are
``{"type", "farm_id", "data", "timestamp", "seq"}`` with ``seq`` counting every message sent on
the connection from 1. A ``subscribe`` with ``batch_ms`` asks for readings in batches: at most one
``readings`` message per ``batch_ms`` whose ``data.readings`` holds what each ``reading`` message
would have carried (its ``data`` plus its ``timestamp``), oldest first. Besides the events of
each stream the server sends ``ready`` (after authentication), ``subscribed`` (the filter in
force), ``heartbeat`` (after ``heartbeat_s`` without any message), ``missed`` (``data.count``
events dropped at this point because the client read too slowly), ``pong`` and ``rejected`` (a
client message it could not use).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, TypeAdapter, ValidationError

from protocol.schemas.common import ApiModel
from protocol.timefmt import iso

__all__ = [
    "CLOSE_FORBIDDEN",
    "CLOSE_GOING_AWAY",
    "CLOSE_INTERNAL",
    "CLOSE_NORMAL",
    "CLOSE_POLICY",
    "CLOSE_TOO_MANY",
    "CLOSE_UNAUTHENTICATED",
    "MAX_BATCH_MS",
    "MIN_BATCH_MS",
    "AuthMessage",
    "ClientMessage",
    "PingMessage",
    "StreamClosed",
    "SubscribeMessage",
    "batch_prefix",
    "compact_json",
    "frame",
    "frame_prefix",
    "id_strings",
    "parse_client_message",
    "text_frames",
    "with_seq",
]

# RFC 6455 section 7.4.1 codes, and the 4000-4999 private range for docs/design.md 7's codes.
CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_INTERNAL = 1011
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_TOO_MANY = 4429

_MAX_FILTER_ITEMS = 1000
MIN_BATCH_MS = 50
MAX_BATCH_MS = 5000


class StreamClosed(Exception):
    """End the connection with a close ``code`` and a short ``reason`` for the client."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"{code} {reason}")
        self.code = code
        self.reason = reason


class AuthMessage(ApiModel):
    """``{"type": "auth", "token": ...}`` or ``{"type": "auth", "api_key": ...}``."""

    type: Literal["auth"]
    token: str | None = Field(None, min_length=1, max_length=8192)
    api_key: str | None = Field(None, min_length=1, max_length=512)


class SubscribeMessage(ApiModel):
    """Narrow the stream to one farm, some devices, some metrics; absent means all."""

    type: Literal["subscribe"]
    farm_id: UUID | None = None
    device_ids: list[UUID] | None = Field(None, max_length=_MAX_FILTER_ITEMS)
    metrics: list[Annotated[str, Field(min_length=1, max_length=64)]] | None = Field(
        None, max_length=_MAX_FILTER_ITEMS
    )
    batch_ms: int | None = Field(
        None,
        ge=MIN_BATCH_MS,
        le=MAX_BATCH_MS,
        description="Send readings as one `readings` message per this many milliseconds",
    )


class PingMessage(ApiModel):
    """``{"type": "ping"}``; answered by ``pong``."""

    type: Literal["ping"]


ClientMessage = Annotated[AuthMessage | SubscribeMessage | PingMessage, Field(discriminator="type")]
_CLIENT_MESSAGE: TypeAdapter[AuthMessage | SubscribeMessage | PingMessage] = TypeAdapter(
    ClientMessage
)


def parse_client_message(text: str) -> AuthMessage | SubscribeMessage | PingMessage:
    """Parse one client message; raises ``ValueError`` with a readable reason."""
    try:
        return _CLIENT_MESSAGE.validate_json(text)
    except ValidationError as err:
        issues = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'message'}: {e['msg']}"
            for e in err.errors(include_url=False)
        )
        raise ValueError(issues) from None


# One encoder for every message: ``json.dumps`` with ``separators`` builds a new one per call,
# a quarter of its cost for a reading's message (and a tablet gets one per reading).
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def compact_json(value: Any) -> str:
    """``value`` as JSON text without spaces, as ``json.dumps(value, separators=(",", ":"))``."""
    return _COMPACT.encode(value)


def frame_prefix(type_: str, farm_id: str | None, data: dict[str, Any], at: datetime) -> str:
    """A server message as JSON text up to its ``seq`` value (shared by every connection)."""
    body = _COMPACT.encode(
        {"type": type_, "farm_id": farm_id, "data": data, "timestamp": iso(at), "seq": 0}
    )
    return body[: -len("0}")]


def frame(type_: str, farm_id: str | None, data: dict[str, Any], at: datetime, seq: int) -> str:
    """One server message as JSON text."""
    return with_seq(frame_prefix(type_, farm_id, data, at), seq)


def batch_prefix(farm_id: str | None, readings: Sequence[str], at: datetime) -> str:
    """A ``readings`` message up to its ``seq``, from readings already encoded as JSON objects
    (each one's ``data`` with its ``timestamp``)."""
    head = frame_prefix("readings", farm_id, {"readings": []}, at)
    # The empty list is the first "[]" in the text: type and farm id hold no brackets.
    return head.replace("[]", "[" + ",".join(readings) + "]", 1)


def with_seq(prefix: str, seq: int) -> str:
    """Complete a :func:`frame_prefix` with a connection's sequence number."""
    return f"{prefix}{seq}}}"


def id_strings(ids: Sequence[UUID] | None) -> frozenset[str] | None:
    """UUIDs as the store spells them, or None for "no filter"."""
    return None if ids is None else frozenset(str(i) for i in ids)


_FIN_TEXT = 0x81  # RFC 6455 section 5.2: FIN bit and opcode 0x1 (text)
_LEN_16 = struct.Struct("!BBH")
_LEN_64 = struct.Struct("!BBQ")


def text_frames(texts: Iterable[str]) -> bytes:
    """Server-to-client text frames, back to back, for one socket write.

    RFC 6455 section 5.2: a server never masks; payload lengths up to 125 fit the second byte,
    126 announces a 16-bit length and 127 a 64-bit one, in network byte order.
    """
    parts: list[bytes] = []
    for text in texts:
        payload = text.encode()
        size = len(payload)
        if size < 126:
            parts.append(bytes((_FIN_TEXT, size)))
        elif size < 65536:
            parts.append(_LEN_16.pack(_FIN_TEXT, 126, size))
        else:
            parts.append(_LEN_64.pack(_FIN_TEXT, 127, size))
        parts.append(payload)
    return b"".join(parts)
