"""/health, /healthz, /supabase-items and the published token key (/.well-known/jwks.json)."""

from __future__ import annotations

from aiohttp import web

from cloud.services.health import HealthService
from cloud.web.keys import HEALTH, JWKS
from protocol.http.system_routes import system_api
from protocol.schemas.jwks import JwkSet


def _health(request: web.Request) -> HealthService:
    return request.app[HEALTH]


# /health, /healthz and /supabase-items are shared with the agent (protocol/http/system_routes.py).
api = system_api(_health)
_TAG = "System"


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
