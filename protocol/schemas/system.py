"""System endpoints: detailed health and backend connectivity (docs/design.md section 12)."""

from __future__ import annotations

from protocol.schemas.common import Schema, Timestamp

__all__ = ["Connectivity", "DetailedHealth"]


class DetailedHealth(Schema):
    """GET /healthz."""

    status: str
    timestamp: Timestamp
    version: str
    checks: dict[str, str]
    uptime: int
    memory_usage: str
    cpu_usage: str
    memory_rss_bytes: int


class Connectivity(Schema):
    """GET /supabase-items: the backend link (the path carries the backend's name)."""

    status: str
    items_count: int
    connection_time: int
    last_sync: Timestamp | None
