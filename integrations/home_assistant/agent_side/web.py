"""The hub integration (integrations/home_assistant/routes.py) served by the agent's service."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import HOME_AUTOMATION
from integrations.home_assistant.routes import home_automation_api
from integrations.home_assistant.service import HomeAutomation

__all__ = ["api"]


def _integration(request: web.Request) -> HomeAutomation:
    return request.app[HOME_AUTOMATION]


api = home_automation_api(_integration)
