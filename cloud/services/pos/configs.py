"""POS configurations: CRUD, activation and the connection test (user path: row-level security
shows each owner their own configurations only)."""

from __future__ import annotations

import logging
import uuid
from typing import Any
from uuid import UUID

import asyncpg

from cloud.pos_provider.errors import ProviderError
from cloud.services.pos.access import require_pos_role
from cloud.services.pos.links import ProviderLinks
from cloud.services.pos.secrets import PosSecrets
from cloud.store import pos_configs as store
from cloud.store.db import Database
from protocol.errors import NotFound
from protocol.identity import Principal
from protocol.schemas.common import PageQuery
from protocol.schemas.pos import (
    PosConfig,
    PosConfigCreate,
    PosConfigList,
    PosConfigUpdate,
    PosProviderError,
    PosTestConnection,
    PosTestResult,
)
from protocol.timefmt import iso

__all__ = ["ACCESS_TOKEN", "SIGNATURE_KEY", "PosConfigService", "config_model"]

log = logging.getLogger(__name__)

ACCESS_TOKEN = "access_token"
SIGNATURE_KEY = "signature_key"


def config_model(row: asyncpg.Record) -> PosConfig:
    """A configuration as answered: whether it holds its secrets, never the secrets."""
    return PosConfig(
        id=str(row["id"]),
        name=row["name"],
        environment=row["environment"],
        has_access_token=row["access_token"] is not None,
        has_webhook_signature_key=row["signature_key"] is not None,
        notification_url=row["notification_url"],
        location_ids=list(row["location_ids"]),
        crop_mappings=list(row["crop_mappings"]),
        harvest_agent_ids=[str(i) for i in row["harvest_agent_ids"]],
        harvest_farm_ids=[str(i) for i in row["harvest_farm_ids"]],
        merchant_id=row["merchant_id"],
        is_active=row["is_active"],
        created_at=iso(row["created_at"]),
        updated_at=iso(row["updated_at"]),
    )


class PosConfigService:
    """Owners manage their configurations and test them against the provider."""

    def __init__(self, db: Database, secrets: PosSecrets, links: ProviderLinks) -> None:
        self._db = db
        self._secrets = secrets
        self._links = links

    async def list(self, principal: Principal, query: PageQuery) -> PosConfigList:
        """The caller's configurations."""
        require_pos_role(principal)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            rows, total = await store.list_configs(conn, query.limit, query.offset)
        return PosConfigList(
            configs=[config_model(r) for r in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def get(self, principal: Principal, config_id: str) -> PosConfig:
        """One of the caller's configurations; 404 for another owner's."""
        require_pos_role(principal)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            row = await store.get_config(conn, UUID(config_id))
        if row is None:
            raise NotFound("POS configuration not found")
        return config_model(row)

    async def create(self, principal: Principal, body: PosConfigCreate) -> PosConfig:
        """Store a configuration with its secrets sealed; inactive until activated."""
        require_pos_role(principal)
        config_id = uuid.uuid4()
        values: dict[str, Any] = {
            "name": body.name,
            "environment": body.environment,
            "access_token": self._secrets.seal(
                config_id, ACCESS_TOKEN, body.access_token.get_secret_value()
            ),
            "signature_key": self._seal_optional(
                config_id, SIGNATURE_KEY, body.webhook_signature_key
            ),
            "notification_url": body.notification_url,
            "location_ids": list(body.location_ids),
            "crop_mappings": [m.model_dump(mode="json") for m in body.crop_mappings],
            "harvest_agent_ids": list(body.harvest_agent_ids),
            "harvest_farm_ids": list(body.harvest_farm_ids),
        }
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            row = await store.create_config(conn, config_id, values)
        log.info("POS configuration %s created by %s", config_id, principal.user_id)
        return config_model(row)

    async def update(
        self, principal: Principal, config_id: str, body: PosConfigUpdate
    ) -> PosConfig:
        """Replace the fields given; a new token or key is sealed like the first."""
        require_pos_role(principal)
        key = UUID(config_id)
        changes: dict[str, Any] = {}
        for name in body.model_fields_set:
            value = getattr(body, name)
            if name == "access_token":
                changes[ACCESS_TOKEN] = self._secrets.seal(
                    key, ACCESS_TOKEN, value.get_secret_value()
                )
            elif name == "webhook_signature_key":
                changes[SIGNATURE_KEY] = self._seal_optional(key, SIGNATURE_KEY, value)
            elif name == "crop_mappings":
                changes[name] = [m.model_dump(mode="json") for m in value]
            else:
                changes[name] = value
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            row = await store.update_config(conn, key, changes)
        if row is None:
            raise NotFound("POS configuration not found")
        return config_model(row)

    async def delete(self, principal: Principal, config_id: str) -> None:
        """Delete a configuration with its mirror, jobs and events."""
        require_pos_role(principal)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if not await store.delete_config(conn, UUID(config_id)):
                raise NotFound("POS configuration not found")
        log.info("POS configuration %s deleted by %s", config_id, principal.user_id)

    async def activate(self, principal: Principal, config_id: str) -> PosConfig:
        """Make this the caller's active configuration (one per owner)."""
        require_pos_role(principal)
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            row = await store.activate(conn, UUID(config_id))
        if row is None:
            raise NotFound("POS configuration not found")
        return config_model(row)

    async def test_connection(self, principal: Principal, body: PosTestConnection) -> PosTestResult:
        """Ask the provider who the token belongs to and where it sells."""
        require_pos_role(principal)
        config_id: UUID | None = None
        if body.config_id is not None:
            config_id = body.config_id
            async with self._db.as_user(UUID(principal.user_id)) as conn:
                row = await store.get_config(conn, config_id)
            if row is None:
                raise NotFound("POS configuration not found")
            environment = row["environment"]
            token = self._secrets.open(config_id, ACCESS_TOKEN, row["access_token"])
        else:
            assert body.access_token is not None  # PosTestConnection requires one source
            environment = body.environment or "sandbox"
            token = body.access_token.get_secret_value()
        client = self._links.client(environment, token)
        try:
            merchant = await client.merchant()
            locations = await client.locations()
        except ProviderError as err:
            return PosTestResult(
                ok=False,
                merchant=None,
                locations=[],
                error=PosProviderError(
                    status=err.status,
                    category=err.category,
                    code=err.code,
                    detail=err.errors[0].detail if err.errors else str(err),
                ),
            )
        if config_id is not None and merchant.get("id"):
            async with self._db.as_user(UUID(principal.user_id)) as conn:
                await store.set_merchant(conn, config_id, str(merchant["id"]))
        return PosTestResult(ok=True, merchant=merchant, locations=locations, error=None)

    def _seal_optional(self, config_id: UUID, name: str, value: Any) -> bytes | None:
        return (
            None if value is None else self._secrets.seal(config_id, name, value.get_secret_value())
        )
