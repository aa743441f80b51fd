"""The composition root of the agent: the web application and its wiring steps, in order."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web

from agent.settings import AgentSettings
from agent.web import (
    actuators,
    alerts,
    api_keys,
    auth,
    climate,
    devices,
    discovered,
    events,
    farms,
    grow_plans,
    hierarchy,
    mfa,
    modbus,
    notify,
    overview,
    sensors,
    system,
    users,
)
from agent.web.foreground import Foreground, foreground_middleware
from agent.web.keys import FOREGROUND, IDENTITY, SETTINGS, STREAMS
from agent.web.storage_full import storage_full_middleware
from agent.wiring.climate import climate_context
from agent.wiring.context import Announce
from agent.wiring.control import control_context
from agent.wiring.devices import device_runtime_context
from agent.wiring.discovery import discovery_context
from agent.wiring.events import events_context
from agent.wiring.grow_plans import grow_plans_context
from agent.wiring.metrics import install_agent_metrics
from agent.wiring.notify import notify_context
from agent.wiring.ops import ops_context
from agent.wiring.overview import overview_context
from agent.wiring.readings import readings_context
from agent.wiring.scheduler import scheduler_context
from agent.wiring.services import services_context
from agent.wiring.store import store_context
from agent.wiring.streams import streams_context
from agent.wiring.sync import sync_context
from farmkit.mail import MailSender
from integrations.home_assistant.agent_side import web as home_automation
from integrations.home_assistant.agent_side.discovery_wiring import hub_context
from integrations.home_assistant.agent_side.wiring import home_automation_context
from integrations.webhooks.agent_side import web as webhooks
from integrations.webhooks.agent_side.wiring import webhooks_context
from protocol.http.docs import install_docs
from protocol.http.endpoints import Api
from protocol.http.middleware import (
    auth_middleware,
    error_middleware,
    request_id_middleware,
)
from protocol.http.openapi import openapi_document
from protocol.http.ratelimit import (
    RateLimiter,
    RateLimitPolicy,
    add_rate_limit_headers,
    rate_limit_middleware,
)
from protocol.http.streams import install_streams
from protocol.http.streams_doc import streams_document
from protocol.identity import Principal
from protocol.version import distribution_version
from webui import ASSET_PREFIX, PAGE_PATHS, install_webui

__all__ = ["api_of_agent", "create_app"]


def api_of_agent() -> Api:
    """Every documented endpoint of the agent."""
    api = Api()
    for module in (
        system,
        auth,
        mfa,
        users,
        api_keys,
        farms,
        overview,
        hierarchy,
        devices,
        modbus,
        discovered,
        sensors,
        climate,
        events,
        alerts,
        actuators,
        grow_plans,
        home_automation,
        webhooks,
        notify,
    ):
        api.extend(module.api)
    return api


def create_app(
    settings: AgentSettings,
    *,
    announce: Announce = lambda _: None,
    clock: Callable[[], float] = time.time,
    mail: MailSender | None = None,
) -> web.Application:
    """Build the agent application; its resources open in ``cleanup_ctx`` order.

    ``mail`` delivers verification and reset mail; by default messages go to the log.
    """

    async def authenticate(request: web.Request) -> Principal | None:
        if request.path.startswith("/ws/"):
            return None  # streams authenticate themselves, to answer with close codes (4401)
        return await request.app[IDENTITY].authenticate(request)

    policy = RateLimitPolicy(
        per_user=settings.rate_limit_per_user,
        per_premium_user=settings.rate_limit_per_premium_user,
        per_address=settings.rate_limit_per_address,
        unmetered_paths=PAGE_PATHS,
        unmetered_prefixes=(ASSET_PREFIX,),
    )
    foreground = Foreground()
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[
            foreground_middleware(foreground),
            request_id_middleware,
            error_middleware,
            storage_full_middleware,
            auth_middleware(authenticate),
            rate_limit_middleware(RateLimiter(clock), policy),
        ],
    )
    app[SETTINGS] = settings
    app[FOREGROUND] = foreground
    install_agent_metrics(app, settings)
    app.on_response_prepare.append(add_rate_limit_headers)

    api = api_of_agent()
    api.install(app)
    install_streams(app, lambda app: app.get(STREAMS), settings.ws_send_timeout_s)
    install_webui(app, "agent")
    install_docs(
        app,
        lambda: openapi_document(
            api,
            title=f"{settings.farm_name} API",
            version=distribution_version(),
            description="Vertical farm edge agent: farm hierarchy, devices, control and identity.",
            extensions={
                "x-streams": streams_document(
                    max_connections_per_user=settings.ws_max_connections_per_user,
                    heartbeat_s=settings.ws_heartbeat_s,
                )
            },
        ),
    )

    app.cleanup_ctx.extend(
        [
            store_context(settings),
            scheduler_context(),
            services_context(settings, announce=announce, clock=clock, mail=mail),
            readings_context(settings),
            events_context(settings),
            ops_context(settings),
            streams_context(settings),
            device_runtime_context(settings),
            discovery_context(settings),
            control_context(settings),
            hub_context(settings),
            home_automation_context(settings),
            climate_context(settings, clock=clock),
            grow_plans_context(settings, clock=clock),
            overview_context(settings, clock=clock),
            webhooks_context(settings),
            notify_context(settings),
            sync_context(),
        ]
    )
    return app
