"""The POS reads, answered from the mirror (so they work when the provider is slow or down)."""

from __future__ import annotations

from uuid import UUID

from cloud.services.pos.access import require_pos_role
from cloud.store import pos_configs, pos_mirror
from cloud.store.db import Database
from protocol.errors import NotFound
from protocol.identity import Principal
from protocol.schemas.pos import POS_PAGES, PosListQuery, PosObjectPage
from protocol.timefmt import iso

__all__ = ["PosReads"]


class PosReads:
    """Pages of the caller's mirrored objects."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(self, principal: Principal, resource: str, query: PosListQuery) -> PosObjectPage:
        """A page of ``resource`` of the chosen (or the active) configuration."""
        require_pos_role(principal)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if query.config_id is not None:
                config = await pos_configs.get_config(conn, query.config_id)
                if config is None:
                    raise NotFound("POS configuration not found")
            else:
                config = await pos_configs.active_config_of(conn, UUID(principal.user_id))
                if config is None:
                    raise NotFound("No active POS configuration; activate one first")
            items, total = await pos_mirror.list_objects(
                conn,
                config["id"],
                resource,
                location_id=query.location_id,
                begin=query.begin_time,
                end=query.end_time,
                limit=query.limit,
                offset=query.offset,
            )
            cursors = {
                c["resource"]: c["last_synced_at"]
                for c in await pos_mirror.cursors(conn, config["id"])
            }
        synced = cursors.get(resource)
        return POS_PAGES[resource].model_validate(
            {
                "config_id": str(config["id"]),
                "total": total,
                "limit": query.limit,
                "offset": query.offset,
                "last_synced_at": None if synced is None else iso(synced),
                resource: items,
            }
        )
