"""/api/v1/agents: create an agent with a pairing code, and pair it."""

from __future__ import annotations

from aiohttp import web

from cloud.web.keys import PAIRING
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.agents import AgentCreate, AgentCreated, PairRequest, PairResult

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
