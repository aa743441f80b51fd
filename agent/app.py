"""The composition root of the agent: builds every object and wires them into the web app."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from importlib import metadata
from pathlib import Path

from aiohttp import web

from agent.devices.calibration_runner import Stability
from agent.devices.profiles import load_profiles
from agent.keys import load_or_create_signing_key
from agent.services.calibration import CalibrationService
from agent.services.calibration_session import CalibrationSessions
from agent.services.devices import DeviceService
from agent.services.farms import FarmService
from agent.services.health import HealthService
from agent.services.hierarchy import HierarchyService
from agent.services.identity import IdentityService
from agent.services.sample_data import create_sample_farm
from agent.services.sensors import SensorService
from agent.settings import AgentSettings
from agent.store.calibrations import CalibrationStore
from agent.store.db import Database
from agent.store.devices import DeviceStore
from agent.store.farms import FarmStore
from agent.store.hierarchy import HierarchyStore
from agent.store.sessions import SessionStore
from agent.store.users import UserStore
from agent.web import auth, devices, farms, hierarchy, sensors, system
from agent.web.keys import (
    CALIBRATION,
    CALIBRATION_SESSIONS,
    DATABASE,
    DEVICES,
    FARMS,
    HEALTH,
    HIERARCHY,
    IDENTITY,
    OPENAPI,
    SENSORS,
    SETTINGS,
)
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
from protocol.identity import Principal, Role
from protocol.tokens import TokenSigner, TokenVerifier

__all__ = ["create_app", "version"]

log = logging.getLogger(__name__)

Announce = Callable[[str], None]
ISSUER = "farm-agent"
# The profiles shipped beside the packages; a settings field should replace this (see report).
FIRMWARE_PROFILES = Path(__file__).resolve().parents[1] / "firmware_profiles"


def version() -> str:
    """The installed distribution's version."""
    try:
        return metadata.version("vertical-farm")
    except metadata.PackageNotFoundError:
        return "0.0.0"


async def _sample_farm(app: web.Application, settings: AgentSettings) -> None:
    """The demo's farm, owned by the first admin, on a database without farms."""
    admin = await UserStore(app[DATABASE]).by_email(settings.admin_email.strip().lower())
    if admin is None:
        log.warning("no user %s to own the sample farm; none created", settings.admin_email)
        return
    owner = Principal(user_id=admin["id"], email=admin["email"], role=Role(admin["role"]))
    created = await create_sample_farm(app[FARMS], app[HIERARCHY], owner)
    if created is not None:
        log.info("sample farm %s ready", created.farm_id)


def api_of_agent() -> Api:
    """Every documented endpoint of the agent."""
    api = Api()
    for module in (system, auth, farms, hierarchy, devices, sensors):
        api.extend(module.api)
    return api


def create_app(
    settings: AgentSettings,
    *,
    announce: Announce = lambda _: None,
    clock: Callable[[], float] = time.time,
) -> web.Application:
    """Build the agent application; resources open in ``cleanup_ctx`` order."""

    async def authenticate(request: web.Request) -> Principal | None:
        return await request.app[IDENTITY].authenticate(request)

    policy = RateLimitPolicy(
        per_user=settings.rate_limit_per_user,
        per_premium_user=settings.rate_limit_per_premium_user,
        per_address=settings.rate_limit_per_address,
    )
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[
            request_id_middleware,
            error_middleware,
            auth_middleware(authenticate),
            rate_limit_middleware(RateLimiter(clock), policy),
        ],
    )
    app[SETTINGS] = settings
    app.on_response_prepare.append(add_rate_limit_headers)

    api = api_of_agent()
    api.install(app)
    system.install_docs(app)
    app[OPENAPI] = openapi_document(
        api,
        title=f"{settings.farm_name} API",
        version=version(),
        description="Vertical farm edge agent: farm hierarchy, devices, control and identity.",
    )

    async def store(app: web.Application) -> AsyncIterator[None]:
        db = Database(settings.database_path)
        await db.open()
        app[DATABASE] = db
        yield
        await db.close()

    async def services(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        key = load_or_create_signing_key(settings.signing_key_path)
        signer = TokenSigner(ISSUER, key, settings.access_token_ttl_s)
        verifier = TokenVerifier({signer.issuer: signer.public_key})
        identity = IdentityService(
            UserStore(db), SessionStore(db), signer, verifier, settings.refresh_token_ttl_s
        )
        app[IDENTITY] = identity
        app[FARMS] = FarmService(db, FarmStore(db))
        app[HIERARCHY] = HierarchyService(db, HierarchyStore(db))
        app[HEALTH] = HealthService(db, version())
        profiles = load_profiles(FIRMWARE_PROFILES)
        device_store, calibration_store = DeviceStore(db), CalibrationStore(db)
        devices = DeviceService(db, device_store, calibration_store, profiles)
        app[DEVICES] = devices
        app[SENSORS] = SensorService(devices, device_store, calibration_store)
        calibration = CalibrationService(devices, calibration_store, stability=Stability())
        await calibration.load()
        app[CALIBRATION] = calibration
        sessions = CalibrationSessions(calibration)
        app[CALIBRATION_SESSIONS] = sessions
        password = settings.admin_password.get_secret_value() if settings.admin_password else None
        first = await identity.ensure_first_admin(settings.admin_email, password)
        if first is not None:
            shown = first.generated_password or "(from FARM_ADMIN_PASSWORD)"
            announce(f"First admin: {first.email}  password: {shown}")
        if settings.sample_data:
            await _sample_farm(app, settings)
        yield
        await sessions.close()

    app.cleanup_ctx.extend([store, services])
    return app
