"""Typed application keys for what handlers use (set by the app factory)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from cloud.services.alerts import AlertService
from cloud.services.api_keys import ApiKeyAuthenticator
from cloud.services.auth_events import AuthEvents
from cloud.services.climate import ClimateService
from cloud.services.devices import DeviceService
from cloud.services.events import EventService
from cloud.services.farms import FarmService
from cloud.services.flows import (
    CloudAccountFlows,
    CloudApiKeys,
    CloudLogin,
    CloudMfa,
    CloudSessions,
)
from cloud.services.grow_plans import GrowPlanService
from cloud.services.health import HealthService
from cloud.services.identity import IdentityService
from cloud.services.notify.history import NotificationHistory
from cloud.services.notify.watch import SilenceWatch
from cloud.services.overview import OverviewService
from cloud.services.pairing import PairingService
from cloud.services.permissions import PermissionService
from cloud.services.pos import PosConfigService, PosJobService, PosReads, PosWebhookReceiver
from cloud.services.readings import ReadingService
from cloud.services.sensors import SensorService
from cloud.services.sync import SyncService
from cloud.services.users import UserService
from cloud.settings import CloudSettings
from cloud.store.db import Database
from integrations.home_assistant.live import HubStateStream
from integrations.home_assistant.service import HomeAutomation
from integrations.webhooks import WebhookDeliverer
from integrations.webhooks.cloud_side.service import WebhookService
from protocol.live.service import StreamService
from protocol.schemas.jwks import JwkSet

SETTINGS = web.AppKey("settings", CloudSettings)
DATABASE = web.AppKey("database", Database)
IDENTITY = web.AppKey("identity", IdentityService)
JWKS = web.AppKey("jwks", JwkSet)
FARMS = web.AppKey("farms", FarmService)
DEVICES = web.AppKey("devices", DeviceService)
GROW_PLANS = web.AppKey("grow_plans", GrowPlanService)
READINGS = web.AppKey("readings", ReadingService)
EVENTS = web.AppKey("events", EventService)
SENSORS = web.AppKey("sensors", SensorService)
OVERVIEW = web.AppKey("overview", OverviewService)
ALERTS = web.AppKey("alerts", AlertService)
CLIMATE = web.AppKey("climate", ClimateService)
HEALTH = web.AppKey("health", HealthService)
PAIRING = web.AppKey("pairing", PairingService)
SYNC = web.AppKey("sync", SyncService)
SYNC_TURNS = web.AppKey("sync_turns", asyncio.Semaphore)
STREAMS = web.AppKey("streams", StreamService)
# Identity flows (sessions, account flows, MFA).
SESSIONS = web.AppKey("sessions", CloudSessions)
LOGIN = web.AppKey("login", CloudLogin)
AUTH_FLOWS = web.AppKey("auth_flows", CloudAccountFlows)
MFA = web.AppKey("mfa", CloudMfa)
# Users, permissions, API keys, auth events.
USERS = web.AppKey("users", UserService)
PERMISSIONS = web.AppKey("permissions", PermissionService)
API_KEYS = web.AppKey("api_keys", CloudApiKeys)
API_KEY_AUTH = web.AppKey("api_key_auth", ApiKeyAuthenticator)
AUTH_EVENTS = web.AppKey("auth_events", AuthEvents)
# The POS provider integration.
POS_CONFIGS = web.AppKey("pos_configs", PosConfigService)
POS_JOBS = web.AppKey("pos_jobs", PosJobService)
POS_READS = web.AppKey("pos_reads", PosReads)
POS_WEBHOOK = web.AppKey("pos_webhook", PosWebhookReceiver)
# The hub integration.
HOME_AUTOMATION = web.AppKey("home_automation", HomeAutomation)
HUB_STATE_STREAM = web.AppKey("hub_state_stream", HubStateStream)
# Outgoing webhooks.
WEBHOOKS = web.AppKey("webhooks", WebhookService)
WEBHOOK_DELIVERER = web.AppKey("webhook_deliverer", WebhookDeliverer)
SILENCE_WATCH = web.AppKey("silence_watch", SilenceWatch)
NOTIFY_HISTORY = web.AppKey("notify_history", NotificationHistory)
