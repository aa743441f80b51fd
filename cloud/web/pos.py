"""/api/v1/pos/*: POS configurations, mirror reads, sync jobs and the provider's webhook."""

from __future__ import annotations

from aiohttp import web

from cloud.pos_provider.signature import SIGNATURE_HEADER
from cloud.web.keys import POS_CONFIGS, POS_JOBS, POS_READS, POS_WEBHOOK
from protocol.errors import PayloadTooLarge
from protocol.http.endpoints import Api, Handler, principal_of
from protocol.schemas.common import PageQuery
from protocol.schemas.pos import (
    POS_PAGES,
    PosConfig,
    PosConfigCreate,
    PosConfigList,
    PosConfigUpdate,
    PosListQuery,
    PosObjectPage,
    PosSyncKind,
    PosSyncStarted,
    PosSyncStatus,
    PosTestConnection,
    PosTestResult,
    PosWebhookAck,
)

api = Api()
_TAG = "POS"
WEBHOOK_PATH = "/api/v1/pos/webhook"
WEBHOOK_MAX_BYTES = 1024 * 1024


@api.route(
    "GET",
    "/api/v1/pos/configs",
    summary="List your POS configurations",
    tag=_TAG,
    query=PageQuery,
    response=PosConfigList,
    errors=(403,),
)
async def list_configs(request: web.Request, query: PageQuery) -> PosConfigList:
    """Admins and farm managers see their own configurations only."""
    return await request.app[POS_CONFIGS].list(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/pos/configs",
    summary="Create a POS configuration (secrets are stored encrypted, never answered)",
    tag=_TAG,
    body=PosConfigCreate,
    response=PosConfig,
    status=201,
    errors=(403,),
)
async def create_config(request: web.Request, body: PosConfigCreate) -> PosConfig:
    """Inactive until activated."""
    return await request.app[POS_CONFIGS].create(principal_of(request), body)


@api.route(
    "GET",
    "/api/v1/pos/configs/{config_id}",
    summary="One POS configuration",
    tag=_TAG,
    response=PosConfig,
    errors=(403, 404),
)
async def get_config(request: web.Request, config_id: str) -> PosConfig:
    """Another owner's configuration is a 404."""
    return await request.app[POS_CONFIGS].get(principal_of(request), config_id)


@api.route(
    "PUT",
    "/api/v1/pos/configs/{config_id}",
    summary="Update a POS configuration",
    tag=_TAG,
    body=PosConfigUpdate,
    response=PosConfig,
    errors=(403, 404),
)
async def update_config(request: web.Request, config_id: str, body: PosConfigUpdate) -> PosConfig:
    """The fields given replace the stored ones."""
    return await request.app[POS_CONFIGS].update(principal_of(request), config_id, body)


@api.route(
    "DELETE",
    "/api/v1/pos/configs/{config_id}",
    summary="Delete a POS configuration with its synced data and jobs",
    tag=_TAG,
    status=204,
    errors=(403, 404),
)
async def delete_config(request: web.Request, config_id: str) -> None:
    """Deleting is final."""
    await request.app[POS_CONFIGS].delete(principal_of(request), config_id)


@api.route(
    "PUT",
    "/api/v1/pos/configs/{config_id}/activate",
    summary="Make this your active POS configuration (one per owner)",
    tag=_TAG,
    response=PosConfig,
    errors=(403, 404),
)
async def activate_config(request: web.Request, config_id: str) -> PosConfig:
    """The owner's other configurations become inactive."""
    return await request.app[POS_CONFIGS].activate(principal_of(request), config_id)


@api.route(
    "POST",
    "/api/v1/pos/test-connection",
    summary="Ask the POS provider about a configuration or a token",
    tag=_TAG,
    body=PosTestConnection,
    response=PosTestResult,
    errors=(403, 404),
)
async def test_connection(request: web.Request, body: PosTestConnection) -> PosTestResult:
    """Answers the merchant and its locations, or the provider's error category and code."""
    return await request.app[POS_CONFIGS].test_connection(principal_of(request), body)


def _read(resource: str) -> Handler:
    async def read(request: web.Request, query: PosListQuery) -> PosObjectPage:
        return await request.app[POS_READS].list(principal_of(request), resource, query)

    read.__name__ = f"list_{resource}"
    read.__doc__ = f"From the synced mirror: {resource.replace('_', ' ')}, newest first."
    return read


for _resource in POS_PAGES:
    api.route(
        "GET",
        "/api/v1/pos/" + _resource.replace("_", "-"),
        summary=f"POS {_resource.replace('_', ' ')} from the synced mirror",
        tag=_TAG,
        query=PosListQuery,
        response=POS_PAGES[_resource],
        errors=(403, 404),
    )(_read(_resource))


def _start(kind: PosSyncKind) -> Handler:
    async def start(request: web.Request, config_id: str) -> PosSyncStarted:
        return await request.app[POS_JOBS].start(principal_of(request), kind, config_id)

    start.__name__ = f"sync_{kind}"
    start.__doc__ = f"Queue a background sync of {kind}; answers the job (202)."
    return start


_KINDS: tuple[PosSyncKind, ...] = ("all", "customers", "orders", "payments", "products")
for _kind in _KINDS:
    api.route(
        "POST",
        f"/api/v1/pos/sync/{_kind}/{{config_id}}",
        summary=f"Start a background sync of {_kind}",
        tag=_TAG,
        response=PosSyncStarted,
        status=202,
        errors=(403, 404),
    )(_start(_kind))


@api.route(
    "GET",
    "/api/v1/pos/sync/status/{config_id}",
    summary="Sync jobs of a configuration: state, progress, errors, timings",
    tag=_TAG,
    response=PosSyncStatus,
    errors=(403, 404),
)
async def sync_status(request: web.Request, config_id: str) -> PosSyncStatus:
    """Newest jobs first."""
    return await request.app[POS_JOBS].status(principal_of(request), config_id)


@api.route(
    "POST",
    WEBHOOK_PATH,
    summary="The POS provider's webhook (signed with the configuration's signature key)",
    tag=_TAG,
    response=PosWebhookAck,
    auth=False,
    errors=(400, 401, 403, 413),
)
async def webhook(request: web.Request) -> PosWebhookAck:
    """Verified, stored, answered at once; applied in the background."""
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge() from None
    if len(body) > WEBHOOK_MAX_BYTES:
        raise PayloadTooLarge()
    return await request.app[POS_WEBHOOK].receive(
        request.headers.get(SIGNATURE_HEADER), body, request.query.get("config_id")
    )
