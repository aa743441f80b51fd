"""The request-serving services: identity, farms, hierarchy, devices, calibration, health, sync."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from agent.clock import AgentClock, probe_of
from agent.devices.calibration_runner import Stability
from agent.devices.profiles import load_profiles
from agent.services.calibration.service import CalibrationService
from agent.services.calibration.session import CalibrationSessions
from agent.services.devices.registry import DeviceService
from agent.services.devices.sensors import SensorService
from agent.services.health import HealthService
from agent.services.hierarchy.farms import FarmService
from agent.services.hierarchy.levels import HierarchyService
from agent.services.hierarchy.sample_data import create_sample_farm
from agent.services.live.fanout import EventFanout
from agent.settings import AgentSettings
from agent.store.calibrations import CalibrationStore
from agent.store.devices import DeviceStore
from agent.store.farms import FarmStore
from agent.store.hierarchy import HierarchyStore
from agent.store.users import UserStore
from agent.sync.replica import trust_cloud
from agent.sync.runtime import SyncRuntime
from agent.web.keys import (
    CALIBRATION,
    CALIBRATION_SESSIONS,
    CLOCK,
    DATABASE,
    DEVICES,
    EVENT_FANOUT,
    FARMS,
    HEALTH,
    HIERARCHY,
    SENSORS,
    SYNC,
)
from agent.wiring.context import Announce, CleanupContext
from agent.wiring.events import build_event_log, fan_out
from agent.wiring.identity import identity_services
from agent.wiring.sync import stuck_sync_alert
from farmkit.mail import MailSender
from protocol.identity import Principal, Role
from protocol.keyfile import load_or_create_private_key
from protocol.tokens import TokenSigner, TokenVerifier
from protocol.version import distribution_version

__all__ = ["ISSUER", "services_context"]

log = logging.getLogger(__name__)

ISSUER = "farm-agent"


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


def services_context(
    settings: AgentSettings,
    *,
    announce: Announce,
    clock: Callable[[], float],
    mail: MailSender | None,
) -> CleanupContext:
    """Build the services every request handler uses; create the first admin."""

    async def services(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        key = load_or_create_private_key(settings.signing_key_path)
        signer = TokenSigner(ISSUER, key, settings.access_token_ttl_s)
        verifier = TokenVerifier({signer.issuer: signer.public_key})
        cloud_link = trust_cloud(verifier, settings.state_dir)  # once paired (agent/sync)
        identity = identity_services(app, db, settings, signer, verifier, mail, clock)
        fanout = EventFanout()
        app[EVENT_FANOUT] = fanout
        event_log = build_event_log(app, settings, fanout)  # status changes are stored too
        app[FARMS] = FarmService(
            db, FarmStore(db), on_change=fan_out(fanout.publish_farm_status, event_log.farm_status)
        )
        app[HIERARCHY] = HierarchyService(HierarchyStore(db))
        app[CLOCK] = AgentClock(probe_of(settings.clock_sync_source), wall=clock)
        app[HEALTH] = HealthService(db, distribution_version())
        app[HEALTH].add_check("clock", app[CLOCK].describe)
        app[SYNC] = SyncRuntime(
            settings,
            db,
            verifier,
            cloud_link,
            alert=stuck_sync_alert(FarmStore(db), event_log),
            clock=app[CLOCK],
        )
        app[HEALTH].watch_sync(app[SYNC].report)
        profiles = load_profiles(settings.profiles_dir)
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

    return services
