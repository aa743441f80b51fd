"""Harvests reach the shop: a harvested grow plan's quantity is added to the POS inventory of
the item variation its crop maps to, once (the provider's idempotency key is derived from the
plan, and the push row is per plan), and the new count lands in the mirror."""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import asyncpg

from cloud.pos_provider.errors import ProviderError, ProviderUnavailable
from cloud.services.pos.configs import ACCESS_TOKEN
from cloud.services.pos.links import ProviderLinks
from cloud.services.pos.mirror_rows import mirror_rows
from cloud.services.pos.secrets import PosSecrets
from cloud.store import pos_harvests, pos_mirror
from cloud.store.db import Database
from farmkit.backoff import Backoff
from farmkit.secretbox import SecretBoxError
from protocol.timefmt import iso, utcnow

__all__ = ["HarvestPusher", "idempotency_key"]

log = logging.getLogger(__name__)

_MAX_ATTEMPTS = 10
_RETRY = Backoff(30.0, 3600.0)


def idempotency_key(grow_plan_id: Any) -> str:
    """The provider's idempotency key of a harvest: the same plan never adds twice."""
    return f"farm-harvest-{grow_plan_id}"


def _mapping(mappings: list[dict[str, Any]], push: asyncpg.Record) -> dict[str, Any] | None:
    """The mapping of this plan, else of its species."""
    plan = str(push["grow_plan_id"])
    for mapping in mappings:
        if mapping.get("grow_plan_id") == plan:
            return mapping
    for mapping in mappings:
        if mapping.get("species") == push["species"]:
            return mapping
    return None


class HarvestPusher:
    """Pushes queued harvests to the provider."""

    def __init__(self, db: Database, secrets: PosSecrets, links: ProviderLinks) -> None:
        self._db = db
        self._secrets = secrets
        self._links = links

    async def push_next(self) -> bool:
        """Push one due harvest; ``False`` when none was due. The push row stays locked while
        the provider is called, so two processes never push the same harvest at once."""
        async with self._db.as_system() as conn:
            push = await pos_harvests.claim_push(conn)
            if push is None:
                return False
            plan = push["grow_plan_id"]
            config = await pos_harvests.config_for_farm(conn, push["farm_id"])
            mapping = _mapping(list(config["crop_mappings"]), push) if config else None
            if config is None or mapping is None:
                await pos_harvests.finish_push(
                    conn, plan, "unmapped", error="no active POS configuration maps this crop"
                )
                return True
            if mapping["unit"] != push["unit"]:
                await pos_harvests.finish_push(
                    conn,
                    plan,
                    "unmapped",
                    config_id=config["id"],
                    error=f"harvested in {push['unit']}, mapped in {mapping['unit']}",
                )
                return True
            quantity = Decimal(push["quantity"]) * Decimal(str(mapping.get("factor", 1)))
            change = {
                "type": "ADJUSTMENT",
                "adjustment": {
                    "catalog_object_id": mapping["variation_id"],
                    "location_id": mapping["location_id"],
                    "from_state": "NONE",
                    "to_state": "IN_STOCK",
                    "quantity": format(quantity.normalize(), "f"),
                    "occurred_at": iso(push["harvested_at"] or utcnow()),
                },
            }
            try:
                token = self._secrets.open(config["id"], ACCESS_TOKEN, config["access_token"])
                client = self._links.client(config["environment"], token)
                counts = await client.adjust_inventory(idempotency_key(plan), [change])
            except ProviderUnavailable as err:
                if push["attempts"] + 1 >= _MAX_ATTEMPTS:
                    await pos_harvests.finish_push(
                        conn, plan, "failed", config_id=config["id"], error=err.describe()
                    )
                else:
                    await pos_harvests.retry_push(
                        conn, plan, err.describe(), 30.0 * 2 ** push["attempts"]
                    )
                return True
            except (ProviderError, SecretBoxError) as err:
                detail = (
                    err.describe() if isinstance(err, ProviderError) else "token does not decrypt"
                )
                await pos_harvests.finish_push(
                    conn, plan, "failed", config_id=config["id"], error=detail
                )
                return True
            await pos_mirror.upsert_objects(
                conn,
                config["id"],
                config["owner_id"],
                "inventory",
                mirror_rows("inventory", counts),
            )
            await pos_harvests.finish_push(
                conn,
                plan,
                "pushed",
                config_id=config["id"],
                variation_id=mapping["variation_id"],
                location_id=mapping["location_id"],
                pushed_quantity=quantity,
            )
        log.info("harvest of plan %s pushed to POS: %s", plan, quantity)
        return True
