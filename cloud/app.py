"""The composition root of the cloud: builds every object and wires them into the web app."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from cloud.services.admins import AdminAccounts
from cloud.services.alerts import AlertService
from cloud.services.api_keys import API_KEY_HEADER
from cloud.services.climate import ClimateService
from cloud.services.devices import DeviceService
from cloud.services.events import EventService
from cloud.services.farms import FarmService
from cloud.services.grow_plans import GrowPlanService
from cloud.services.health import HealthService
from cloud.services.notify.history import NotificationHistory
from cloud.services.overview import OverviewService
from cloud.services.pairing import PairingService
from cloud.services.rate_limits import SharedRateLimiter
from cloud.services.readings import ReadingService
from cloud.services.sensors import SensorService
from cloud.services.sync import SyncService
from cloud.services.sync_delta import IdentityDeltaSource
from cloud.settings import CloudSettings
from cloud.signing import signing_key
from cloud.store.db import Database
from cloud.store.notify import ContactKeys
from cloud.web import (
    agents,
    alerts,
    api_keys,
    auth,
    climate,
    devices,
    farms,
    grow_plans,
    mfa,
    notify,
    overview,
    pos,
    sensors,
    sync,
    system,
    users,
)
from cloud.web.keys import (
    ALERTS,
    API_KEY_AUTH,
    CLIMATE,
    DATABASE,
    DEVICES,
    EVENTS,
    FARMS,
    GROW_PLANS,
    HEALTH,
    IDENTITY,
    JWKS,
    NOTIFY_HISTORY,
    OVERVIEW,
    PAIRING,
    READINGS,
    SENSORS,
    SETTINGS,
    STREAMS,
    SYNC,
    SYNC_TURNS,
)
from cloud.wiring.identity import identity_services, secret_key
from cloud.wiring.mail import smtp_settings
from cloud.wiring.maintenance import maintenance_context, retention_policy
from cloud.wiring.notify import notify_context
from cloud.wiring.pos import pos_context
from cloud.wiring.streams import streams_context
from cloud.wiring.users import user_services
from farmkit.mail import MailSender
from farmkit.sealing import public_key_text, sealing_private_key, sign_sealing_key
from farmkit.secretbox import SecretBox
from farmkit.smtp import mail_check
from integrations.home_assistant.cloud_side import web as home_automation
from integrations.home_assistant.cloud_side.wiring import home_automation_context
from integrations.webhooks.cloud_side import web as webhooks
from integrations.webhooks.cloud_side.wiring import webhooks_context
from protocol.http.credentials import bearer_token
from protocol.http.docs import install_docs
from protocol.http.endpoints import Api
from protocol.http.forwarded import TRUSTED_PROXIES, TrustedProxies
from protocol.http.metrics import MetricsAccess, install_metrics, parse_networks
from protocol.http.middleware import auth_middleware, error_middleware, request_id_middleware
from protocol.http.openapi import openapi_document
from protocol.http.ratelimit import (
    RateLimitPolicy,
    add_rate_limit_headers,
    rate_limit_middleware,
)
from protocol.http.streams import install_streams
from protocol.http.streams_doc import streams_document
from protocol.identity import Principal
from protocol.jwk import key_id, public_jwk
from protocol.schemas.agents import SealingKey
from protocol.schemas.jwks import Jwk, JwkSet
from protocol.tokens import TokenSigner, TokenVerifier
from protocol.version import distribution_version
from webui import ASSET_PREFIX, PAGE_PATHS, install_webui

__all__ = ["api_of_cloud", "create_app"]

log = logging.getLogger(__name__)


def api_of_cloud() -> Api:
    """Every documented endpoint of the cloud."""
    api = Api()
    for module in (
        system,
        auth,
        mfa,
        users,
        api_keys,
        farms,
        devices,
        sensors,
        overview,
        alerts,
        grow_plans,
        climate,
        agents,
        sync,
        pos,
        home_automation,
        webhooks,
        notify,
    ):
        api.extend(module.api)
    return api


def create_app(
    settings: CloudSettings,
    *,
    clock: Callable[[], float] = time.time,
    mail: MailSender | None = None,
    announce: Callable[[str], None] = print,
) -> web.Application:
    """Build the cloud application; resources open in ``cleanup_ctx`` order.

    ``announce`` shows the operator what they must see once (the first admin's password).

    Start-up fails if a database role could escape row-level security (``UnsafeRoleError``).
    """

    async def authenticate(request: web.Request) -> Principal | None:
        if request.path.startswith("/ws/"):
            return None  # streams authenticate themselves, to answer with close codes (4401)
        token = bearer_token(request.headers)
        if token is not None:
            return await request.app[IDENTITY].principal_from_token(token)
        key = request.headers.get(API_KEY_HEADER)
        if key is not None:
            return await request.app[API_KEY_AUTH].principal_from_api_key(key)
        return None

    policy = RateLimitPolicy(
        per_user=settings.rate_limit_per_user,
        per_premium_user=settings.rate_limit_per_premium_user,
        per_address=settings.rate_limit_per_address,
        # The balancer's health checks come from its own address every few seconds: counted,
        # they would spend that address's anonymous quota and take the process out of service.
        unmetered_paths=frozenset(
            {sync.BATCHES_PATH, sync.BATCHES_PATH + "/", pos.WEBHOOK_PATH, pos.WEBHOOK_PATH + "/"}
            | {"/health", "/health/", "/healthz", "/healthz/"}
        )
        | PAGE_PATHS,
        unmetered_prefixes=(ASSET_PREFIX,),
    )
    limiter = SharedRateLimiter(lambda: app[DATABASE], clock)
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[
            request_id_middleware,
            error_middleware,
            auth_middleware(authenticate),
            # Counted in PostgreSQL: N processes behind a balancer share one quota per caller.
            rate_limit_middleware(limiter, policy),
        ],
    )
    app[SETTINGS] = settings
    app[TRUSTED_PROXIES] = TrustedProxies.parse(settings.trusted_proxies or "")
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    install_metrics(
        app, MetricsAccess(token, parse_networks(settings.metrics_allowed_networks)), "farm_cloud"
    )
    app.on_response_prepare.append(add_rate_limit_headers)

    version = distribution_version()
    api = api_of_cloud()
    api.install(app)
    install_streams(app, lambda app: app.get(STREAMS), settings.ws_send_timeout_s)
    install_webui(app, "cloud")
    install_docs(
        app,
        lambda: openapi_document(
            api,
            title="Vertical farm cloud API",
            version=version,
            description="Cloud service: the farms synced from agents, identity, integrations.",
            extensions={
                "x-streams": streams_document(
                    max_connections_per_user=settings.ws_max_connections_per_user,
                    heartbeat_s=settings.ws_heartbeat_s,
                )
            },
        ),
    )

    async def database(app: web.Application) -> AsyncIterator[None]:
        db = await Database.connect(
            settings.app_dsn.get_secret_value(),
            settings.sync_dsn.get_secret_value(),
            io_timeout=settings.db_io_timeout_s,
            min_size=settings.db_pool_min,
            max_size=settings.db_pool_max,
        )
        app[DATABASE] = db
        yield
        await db.close()

    async def services(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        key = signing_key(settings)
        kid = key_id(key.public_key())
        signer = TokenSigner(settings.issuer, key, settings.access_token_ttl_s, key_id=kid)
        verifier = TokenVerifier({signer.issuer: signer.public_key})
        app[JWKS] = JwkSet(keys=[Jwk(**public_jwk(signer.public_key))])
        app[IDENTITY] = identity_services(app, db, settings, key, signer, verifier, clock, mail)
        user_services(app, db)
        app[FARMS] = FarmService(db)
        app[DEVICES] = DeviceService(db)
        app[GROW_PLANS] = GrowPlanService(db)
        app[READINGS] = ReadingService(db, retention_policy(settings))
        app[EVENTS] = EventService(db)
        app[NOTIFY_HISTORY] = NotificationHistory(db)
        app[SENSORS] = SensorService(db)
        app[ALERTS] = AlertService(db)
        app[CLIMATE] = ClimateService(db, clock)
        app[OVERVIEW] = OverviewService(db, app[ALERTS], app[CLIMATE], app[GROW_PLANS])
        smtp = smtp_settings(settings)
        if smtp is None:
            log.warning(
                "mail is not configured (CLOUD_SMTP_HOST): password reset and e-mail"
                " verification messages are not sent"
            )
        app[HEALTH] = HealthService(db, version, mail=mail_check(smtp))
        sealing = sealing_private_key(key)
        app[PAIRING] = PairingService(
            db,
            settings.issuer,
            signer.public_key,
            settings.pairing_code_ttl_s,
            SealingKey(
                key=public_key_text(sealing.public_key()),
                signature=sign_sealing_key(key, sealing.public_key()),
            ),
        )
        delta = IdentityDeltaSource(
            db, settings.issuer, signer.public_key, settings.sync_revoked_session_window_s
        )
        app[SYNC] = SyncService(
            db,
            delta,
            max_skew_s=settings.sync_max_skew_s,
            max_body_bytes=settings.max_body_bytes,
            clock=clock,
            contact_keys=ContactKeys(sealing, SecretBox(secret_key(settings, key))),
        )
        app[SYNC_TURNS] = asyncio.Semaphore(settings.sync_apply_concurrency)
        if settings.admin_email is not None:
            password = settings.admin_password
            first = await AdminAccounts(db).ensure_first_admin(
                settings.admin_email, password.get_secret_value() if password else None
            )
            if first is not None:
                shown = first.generated_password or "(from CLOUD_ADMIN_PASSWORD)"
                announce(f"First admin: {first.email}  password: {shown}")
        log.info("cloud ready: issuer %s, signing key %s", settings.issuer, kid)
        yield

    app.cleanup_ctx.extend(
        [
            database,
            services,
            maintenance_context(settings, limiter),
            pos_context(settings, lambda: SecretBox(secret_key(settings, signing_key(settings)))),
            webhooks_context(
                settings, lambda: SecretBox(secret_key(settings, signing_key(settings)))
            ),
            streams_context(settings),
            home_automation_context(settings),
            notify_context(
                settings, lambda: SecretBox(secret_key(settings, signing_key(settings)))
            ),
        ]
    )
    return app
