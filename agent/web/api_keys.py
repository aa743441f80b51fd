"""/api/v1/api-keys: admins create, list and revoke API keys (sent as ``X-API-Key``)."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import API_KEYS
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.auth import ApiKeyCreate, ApiKeyCreated, ApiKeyList, ApiKeyListQuery

api = Api()
_TAG = "API keys"


@api.route(
    "POST",
    "/api/v1/api-keys",
    summary="Create an API key for a user (admins); the key is shown once",
    tag=_TAG,
    body=ApiKeyCreate,
    response=ApiKeyCreated,
    status=201,
    errors=(403, 404),
)
async def create_api_key(request: web.Request, body: ApiKeyCreate) -> ApiKeyCreated:
    """A key acting with the user's role and permissions."""
    return await request.app[API_KEYS].create(principal_of(request), body, request.remote)


@api.route(
    "GET",
    "/api/v1/api-keys",
    summary="List API keys (admins), without the keys themselves",
    tag=_TAG,
    query=ApiKeyListQuery,
    response=ApiKeyList,
    errors=(403,),
)
async def list_api_keys(request: web.Request, query: ApiKeyListQuery) -> ApiKeyList:
    """Keys newest first; revoked ones with ``include_revoked=true``."""
    return await request.app[API_KEYS].list(principal_of(request), query)


@api.route(
    "DELETE",
    "/api/v1/api-keys/{key_id}",
    summary="Revoke an API key (admins); refused from the next request",
    tag=_TAG,
    status=204,
    errors=(403,),
)
async def revoke_api_key(request: web.Request, key_id: str) -> None:
    """Revoke the key at once."""
    await request.app[API_KEYS].revoke(principal_of(request), key_id, request.remote)
