"""/api/v1/sync/batches: where agents upload signed, gzip-compressed batches."""

from __future__ import annotations

from aiohttp import web

from cloud.web.keys import SYNC
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
    return await request.app[SYNC].apply(
        request.headers.get(AGENT_HEADER), request.headers.get(SIGNATURE_HEADER), body
    )
