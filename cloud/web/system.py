"""/health, /healthz, /supabase-items and the published token key (/.well-known/jwks.json)."""

from __future__ import annotations

from aiohttp import web

from cloud.web.keys import HEALTH, JWKS
from protocol.http.endpoints import Api
from protocol.schemas.common import Health
from protocol.schemas.jwks import JwkSet
from protocol.schemas.system import Connectivity, DetailedHealth

api = Api()
_TAG = "System"


@api.route("GET", "/health", summary="Liveness", tag=_TAG, response=Health, auth=False)
async def health(request: web.Request) -> Health:
    """Cheap liveness for load balancers."""
    return request.app[HEALTH].health()


@api.route(
    "GET",
    "/healthz",
    summary="Detailed health with real checks",
    tag=_TAG,
    response=DetailedHealth,
    auth=False,
)
async def healthz(request: web.Request) -> DetailedHealth:
    """Both database paths and process figures."""
    return await request.app[HEALTH].detailed()


@api.route(
    "GET",
    "/supabase-items",
    summary="Backend connectivity test",
    tag=_TAG,
    response=Connectivity,
    auth=False,
)
async def backend_items(request: web.Request) -> Connectivity:
    """The database's round trip, the records mirrored, and the newest agent sync."""
    return await request.app[HEALTH].connectivity()


@api.route(
    "GET",
    "/.well-known/jwks.json",
    summary="Keys that verify the cloud's access tokens",
    tag=_TAG,
    response=JwkSet,
    auth=False,
)
async def jwks(request: web.Request) -> web.Response:
    """The cloud's Ed25519 public key as a JWK Set (RFC 7517, RFC 8037)."""
    return web.Response(
        body=request.app[JWKS].model_dump_json().encode(),
        content_type="application/json",
        # Verifiers may cache the set for a few minutes.
        headers={"Cache-Control": "public, max-age=300"},
    )
