"""/api/v1/agents: create an agent with a pairing code, pair it, list and revoke agents."""

from __future__ import annotations

from aiohttp import web

from cloud.web.keys import PAIRING
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.agents import (
    AgentCreate,
    AgentCreated,
    AgentList,
    AgentListQuery,
    DeadLetterList,
    PairRequest,
    PairResult,
    SealingKey,
)
from protocol.schemas.common import PageQuery

api = Api()
_TAG = "Agents"


@api.route(
    "POST",
    "/api/v1/agents",
    summary="Create an agent and its one-time pairing code",
    tag=_TAG,
    body=AgentCreate,
    response=AgentCreated,
    status=201,
    errors=(403,),
)
async def create_agent(request: web.Request, body: AgentCreate) -> AgentCreated:
    """Admins only; the code is shown once and expires."""
    return await request.app[PAIRING].create(principal_of(request), body)


@api.route(
    "POST",
    "/api/v1/agents/pair",
    summary="Pair an agent: redeem a code with its public key",
    tag=_TAG,
    body=PairRequest,
    response=PairResult,
    auth=False,
    errors=(404,),
)
async def pair(request: web.Request, body: PairRequest) -> PairResult:
    """Called by `farm-agent pair`; the code is consumed."""
    return await request.app[PAIRING].pair(body)


@api.route(
    "GET",
    "/api/v1/agents/sealing-key",
    summary="The cloud's public key an agent seals contact point URLs to",
    tag=_TAG,
    response=SealingKey,
    auth=False,
)
async def sealing_key(request: web.Request) -> SealingKey:
    """Signed with the cloud's token key: an agent trusts it only if the signature verifies
    under the key it got at pairing."""
    return request.app[PAIRING].sealing_key()


@api.route(
    "GET",
    "/api/v1/agents",
    summary="List agents with their pairing state and sync progress",
    tag=_TAG,
    query=AgentListQuery,
    response=AgentList,
)
async def list_agents(request: web.Request, query: AgentListQuery) -> AgentList:
    """Admins see every agent, owners their own."""
    return await request.app[PAIRING].list(principal_of(request), query)


@api.route(
    "DELETE",
    "/api/v1/agents/{agent_id}",
    summary="Revoke an agent: the cloud refuses its batches from now on",
    tag=_TAG,
    status=204,
    errors=(403, 404),
)
async def revoke_agent(request: web.Request, agent_id: str) -> None:
    """Admins only; revoking twice is harmless."""
    await request.app[PAIRING].revoke(principal_of(request), agent_id)


@api.route(
    "GET",
    "/api/v1/agents/{agent_id}/dead-letters",
    summary="Records of the agent's batches the cloud refused, and why",
    tag=_TAG,
    query=PageQuery,
    response=DeadLetterList,
    errors=(403, 404),
)
async def dead_letters(request: web.Request, agent_id: str, query: PageQuery) -> DeadLetterList:
    """Admins only; newest first. Refused records are never retried: an operator reads them
    here, fixes the cause, and the agent's next change of the same entity goes through."""
    return await request.app[PAIRING].dead_letters(principal_of(request), agent_id, query)
