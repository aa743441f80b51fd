"""/api/v1/sync/batches: where agents upload signed, gzip-compressed batches."""

from __future__ import annotations

from aiohttp import web

from cloud.web.keys import SYNC, SYNC_TURNS
from protocol.errors import PayloadTooLarge
from protocol.http.endpoints import Api
from protocol.sync import AGENT_HEADER, SIGNATURE_HEADER, Ack

api = Api()
BATCHES_PATH = "/api/v1/sync/batches"


@api.route(
    "POST",
    BATCHES_PATH,
    summary="Apply an agent's signed batch",
    tag="Sync",
    response=Ack,
    auth=False,
    errors=(400, 401, 403, 409, 413),
)
async def upload(request: web.Request) -> Ack:
    """Body: the gzip batch; headers X-Farm-Agent and X-Farm-Signature (protocol/sync.py)."""
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise PayloadTooLarge(details=request.app[SYNC].limits()) from None
    # A few batches applied at once (CLOUD_SYNC_APPLY_CONCURRENCY), the rest waiting their
    # turn: each batch is CPU in this process's event loop and in PostgreSQL, and sixteen at
    # once on two cores applied fewer readings a second than two per process, and made every
    # other request wait behind them (docs/adr/0035-sync-order-and-pipeline.md).
    async with request.app[SYNC_TURNS]:
        return await request.app[SYNC].apply(
            request.headers.get(AGENT_HEADER), request.headers.get(SIGNATURE_HEADER), body
        )
