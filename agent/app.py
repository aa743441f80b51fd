"""The composition root of the agent: builds every object and wires them into the web app."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from importlib import metadata

from aiohttp import web

from agent.devices.calibration_runner import Stability
from agent.devices.mqtt import MqttSettings
from agent.devices.profiles import load_profiles
from agent.keys import load_or_create_signing_key
from agent.services.api_keys import ApiKeyService
from agent.services.auth_events import AuthEvents
from agent.services.auth_flows import AuthFlows, FlowPolicy
from agent.services.calibration import CalibrationService
from agent.services.calibration_runtime import EzoDevices
from agent.services.calibration_session import CalibrationSessions
from agent.services.device_runtime import DeviceRuntime
from agent.services.device_simulation import DeviceSimulation
from agent.services.devices import DeviceService
from agent.services.event_hub import EventHub
from agent.services.farms import FarmService
from agent.services.health import HealthService
from agent.services.hierarchy import HierarchyService
from agent.services.identity import IdentityService, SessionIssuer
from agent.services.login_throttle import LoginThrottle, ThrottlePolicy
from agent.services.mail import LogMailSender, MailSender
from agent.services.mfa import MfaService
from agent.services.permissions import PermissionService
from agent.services.reading_query import ReadingQuery
from agent.services.reading_retention import ReadingRetention, RetentionPolicy
from agent.services.reading_runtime import ReadingRuntime
from agent.services.reading_writer import ReadingWriter
from agent.services.sample_data import create_sample_farm
from agent.services.sensor_readings import SensorReadings
from agent.services.sensors import SensorService
from agent.services.serial_devices import SerialOptions
from agent.services.stream_auth import StreamAuthenticator
from agent.services.stream_connection import StreamLimits
from agent.services.stream_scope import StreamScope
from agent.services.stream_service import StreamService
from agent.services.users import UserService
from agent.settings import AgentSettings
from agent.store.api_keys import ApiKeyStore
from agent.store.auth_events import AuthEventStore
from agent.store.calibrations import CalibrationStore
from agent.store.db import Database
from agent.store.devices import DeviceStore
from agent.store.farms import FarmStore
from agent.store.hierarchy import HierarchyStore
from agent.store.one_time_tokens import OneTimeTokenStore
from agent.store.permissions import PermissionStore
from agent.store.readings import ReadingStore
from agent.store.sessions import SessionStore
from agent.store.users import UserStore
from agent.sync.replica import trust_cloud
from agent.sync.runtime import SyncRuntime
from agent.web import (
    api_keys,
    auth,
    devices,
    farms,
    hierarchy,
    mfa,
    sensors,
    streams,
    system,
    users,
)
from agent.web.keys import (
    API_KEYS,
    AUTH_EVENTS,
    AUTH_FLOWS,
    CALIBRATION,
    CALIBRATION_SESSIONS,
    DATABASE,
    DEVICE_RUNTIME,
    DEVICES,
    EVENT_HUB,
    FARMS,
    HEALTH,
    HIERARCHY,
    IDENTITY,
    MFA,
    OPENAPI,
    PERMISSIONS,
    READINGS,
    SENSORS,
    SETTINGS,
    STREAMS,
    SYNC,
    USERS,
)
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
from protocol.identity import Principal, Role
from protocol.tokens import TokenSigner, TokenVerifier

__all__ = ["create_app", "version"]

log = logging.getLogger(__name__)

Announce = Callable[[str], None]
ISSUER = "farm-agent"


def _days(days: float | None, day_s: float) -> float | None:
    return None if days is None else days * day_s


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


def _identity_services(
    app: web.Application,
    db: Database,
    settings: AgentSettings,
    signer: TokenSigner,
    verifier: TokenVerifier,
    mail: MailSender | None,
    clock: Callable[[], float],
) -> IdentityService:
    """Wire login, sessions, MFA, API keys, users, permissions and their event log."""
    users, sessions, tokens = UserStore(db), SessionStore(db), OneTimeTokenStore(db)
    api_key_store, permission_store = ApiKeyStore(db), PermissionStore(db)
    event_store = AuthEventStore(db)
    events = AuthEvents(event_store)
    throttle = LoginThrottle(
        event_store,
        events,
        ThrottlePolicy(
            per_account=settings.login_failures_per_account,
            per_address=settings.login_failures_per_address,
            window_s=settings.login_failure_window_s,
        ),
    )
    issuer = SessionIssuer(sessions, signer, settings.refresh_token_ttl_s)
    mfa_service = MfaService(
        users,
        tokens,
        sessions,
        issuer,
        throttle,
        events,
        issuer_name=settings.farm_name,
        challenge_ttl_s=settings.mfa_challenge_ttl_s,
        clock=clock,
    )
    flows = AuthFlows(
        users,
        tokens,
        sessions,
        mail or LogMailSender(),
        events,
        FlowPolicy(
            registration_enabled=settings.registration_enabled,
            verify_token_ttl_s=settings.verify_token_ttl_s,
            reset_token_ttl_s=settings.reset_token_ttl_s,
            site_name=settings.farm_name,
        ),
    )
    identity = IdentityService(
        users, sessions, api_key_store, issuer, verifier, throttle, events, mfa_service
    )
    app[IDENTITY] = identity
    app[AUTH_EVENTS] = events
    app[AUTH_FLOWS] = flows
    app[MFA] = mfa_service
    app[API_KEYS] = ApiKeyService(api_key_store, users, events)
    app[USERS] = UserService(users, permission_store, sessions, flows, events)
    app[PERMISSIONS] = PermissionService(db, permission_store, users)
    return identity


def api_of_agent() -> Api:
    """Every documented endpoint of the agent."""
    api = Api()
    for module in (system, auth, mfa, users, api_keys, farms, hierarchy, devices, sensors):
        api.extend(module.api)
    return api


def create_app(
    settings: AgentSettings,
    *,
    announce: Announce = lambda _: None,
    clock: Callable[[], float] = time.time,
    mail: MailSender | None = None,
) -> web.Application:
    """Build the agent application; resources open in ``cleanup_ctx`` order.

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
    streams.install(app)
    app[OPENAPI] = openapi_document(
        api,
        title=f"{settings.farm_name} API",
        version=version(),
        description="Vertical farm edge agent: farm hierarchy, devices, control and identity.",
    )
    install_docs(app, app[OPENAPI])

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
        cloud_link = trust_cloud(verifier, settings.state_dir)  # once paired (agent/sync)
        identity = _identity_services(app, db, settings, signer, verifier, mail, clock)
        hub = EventHub()
        app[EVENT_HUB] = hub
        app[FARMS] = FarmService(db, FarmStore(db), on_change=hub.publish_farm_status)
        app[HIERARCHY] = HierarchyService(db, HierarchyStore(db))
        app[HEALTH] = HealthService(db, version())
        app[SYNC] = SyncRuntime(settings, db, verifier, cloud_link)
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

    async def readings(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        reading_store = ReadingStore(db)
        day = 86_400.0
        policy = RetentionPolicy(
            raw_s=_days(settings.retention_raw_days, day),
            minute_s=_days(settings.retention_minute_days, day),
            hour_s=_days(settings.retention_hour_days, day),
        )
        writer = ReadingWriter(
            reading_store,
            calibration=app[CALIBRATION].correction,
            batch_interval=settings.reading_batch_interval_s,
            max_batch=settings.reading_max_batch,
            max_queue=settings.reading_queue_size,
            clock_skew_ms=round(settings.reading_clock_skew_s * 1000),
            max_ahead_ms=round(settings.reading_max_clock_ahead_s * 1000),
        )
        retention = ReadingRetention(reading_store, policy, chunk=settings.retention_chunk_rows)
        runtime = ReadingRuntime(
            writer, retention, app[DEVICES], retention_interval_s=settings.retention_interval_s
        )
        query = ReadingQuery(
            db,
            reading_store,
            policy,
            point_budget=settings.reading_point_budget,
            max_point_budget=settings.reading_max_point_budget,
        )
        app[SENSORS].attach(SensorReadings(query))
        app[CALIBRATION].attach(latest_raw=runtime.latest)
        await runtime.start()
        app[READINGS] = runtime
        yield
        await runtime.stop()

    async def device_runtime(app: web.Application) -> AsyncIterator[None]:
        mqtt_host, mqtt_port = settings.mqtt_host, settings.mqtt_port
        simulation = None
        if settings.simulate_devices:
            simulation = DeviceSimulation(settings.state_dir / "simulation", app[DEVICES].profiles)
            if settings.mqtt_enabled:
                mqtt_host, mqtt_port = await simulation.start_broker(mqtt_host, mqtt_port)
            if settings.serial_enabled:
                await simulation.start_serial()
        password = settings.mqtt_password
        mqtt = MqttSettings(
            host=mqtt_host,
            port=mqtt_port,
            client_id=settings.mqtt_client_id,
            username=settings.mqtt_username,
            password=password.get_secret_value() if password is not None else None,
        )
        ezo = EzoDevices()
        calibration = app[CALIBRATION]
        serial = SerialOptions(
            interval=settings.serial_poll_interval_s, ezo=ezo, busy=calibration.in_progress
        )
        runtime = DeviceRuntime(
            app[DEVICES],
            app[READINGS].writer,
            mqtt=mqtt if settings.mqtt_enabled else None,
            serial=serial if settings.serial_enabled else None,
            # The WebSocket streams connect here (DeviceEvent per availability, state,
            # command outcome and fault).
            on_event=app[EVENT_HUB].publish_device_event,
        )
        calibration.attach(ezo=ezo)
        await runtime.start()
        app[DEVICE_RUNTIME] = runtime
        app[HEALTH].watch_mqtt(runtime.mqtt_state)
        try:
            if simulation is not None:
                await simulation.register(
                    app[DEVICES], FarmStore(app[DATABASE]), UserStore(app[DATABASE])
                )
                if settings.mqtt_enabled:
                    await simulation.start_mqtt()
            yield
        finally:
            if simulation is not None:
                await simulation.stop_devices()
            await runtime.stop()
            if simulation is not None:
                await simulation.stop_broker()

    async def live_streams(app: web.Application) -> AsyncIterator[None]:
        db, identity = app[DATABASE], app[IDENTITY]
        limits = StreamLimits(
            max_connections_per_user=settings.ws_max_connections_per_user,
            heartbeat_s=settings.ws_heartbeat_s,
            queue_size=settings.ws_queue_size,
            auth_timeout_s=settings.ws_auth_timeout_s,
            recheck_s=settings.ws_recheck_s,
        )
        authenticator = StreamAuthenticator(
            identity.principal_from_token, identity.principal_from_api_key
        )
        service = StreamService(
            app[EVENT_HUB], StreamScope(db, DeviceStore(db)), authenticator, limits
        )
        service.attach_readings(app[READINGS].writer)
        app[STREAMS] = service
        yield
        await service.close()

    app.cleanup_ctx.extend([store, services, readings, live_streams, device_runtime])

    async def cloud_sync(app: web.Application) -> AsyncIterator[None]:
        app[SYNC].start()
        yield
        await app[SYNC].stop()

    app.cleanup_ctx.append(cloud_sync)
    return app
