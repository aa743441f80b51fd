"""GET /api/v1/grow-plans/{plan_id}/progress, which agent and cloud both serve, declared once;
both compute it by one rule (protocol/grow_progress.py) over their own stored readings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from protocol.http.endpoints import Api, principal_of
from protocol.identity import Principal
from protocol.schemas.grow_plans import GrowPlanProgress

__all__ = ["TAG", "PlanProgress", "progress_api"]

TAG = "Grow plans"


class PlanProgress(Protocol):
    """One side's grow plan service."""

    async def progress(self, principal: Principal, plan_id: str) -> GrowPlanProgress:
        """Day, stage, harvest date and climate adherence of a visible plan (404 otherwise)."""
        ...


def progress_api(plans_of: Callable[[web.Request], PlanProgress]) -> Api:
    """The progress endpoint, answered by the service ``plans_of(request)`` returns."""
    api = Api()

    @api.route(
        "GET",
        "/api/v1/grow-plans/{plan_id}/progress",
        summary="Progress and climate adherence of a grow plan",
        tag=TAG,
        response=GrowPlanProgress,
        errors=(404,),
    )
    async def grow_plan_progress(request: web.Request, plan_id: str) -> GrowPlanProgress:
        """Day, stage, days to harvest and per-stage climate adherence so far."""
        return await plans_of(request).progress(principal_of(request), plan_id)

    return api
