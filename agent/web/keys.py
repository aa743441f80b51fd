"""Typed application keys for the services handlers use (set by the app factory)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from agent.services.api_keys import ApiKeyService
from agent.services.auth_events import AuthEvents
from agent.services.auth_flows import AuthFlows
from agent.services.calibration import CalibrationService
from agent.services.calibration_session import CalibrationSessions
from agent.services.device_runtime import DeviceRuntime
from agent.services.devices import DeviceService
from agent.services.event_hub import EventHub
from agent.services.farms import FarmService
from agent.services.health import HealthService
from agent.services.hierarchy import HierarchyService
from agent.services.identity import IdentityService
from agent.services.mfa import MfaService
from agent.services.permissions import PermissionService
from agent.services.reading_runtime import ReadingRuntime
from agent.services.sensors import SensorService
from agent.services.stream_service import StreamService
from agent.services.users import UserService
from agent.settings import AgentSettings
from agent.store.db import Database
from agent.sync.runtime import SyncRuntime

SETTINGS = web.AppKey("settings", AgentSettings)
DATABASE = web.AppKey("database", Database)
FARMS = web.AppKey("farms", FarmService)
HIERARCHY = web.AppKey("hierarchy", HierarchyService)
IDENTITY = web.AppKey("identity", IdentityService)
AUTH_FLOWS = web.AppKey("auth_flows", AuthFlows)
AUTH_EVENTS = web.AppKey("auth_events", AuthEvents)
MFA = web.AppKey("mfa", MfaService)
API_KEYS = web.AppKey("api_keys", ApiKeyService)
USERS = web.AppKey("users", UserService)
PERMISSIONS = web.AppKey("permissions", PermissionService)
OPENAPI = web.AppKey("openapi", dict[str, Any])
STARTED_AT = web.AppKey("started_at", float)
HEALTH = web.AppKey("health", HealthService)
DEVICES = web.AppKey("devices", DeviceService)
SENSORS = web.AppKey("sensors", SensorService)
CALIBRATION = web.AppKey("calibration", CalibrationService)
CALIBRATION_SESSIONS = web.AppKey("calibration_sessions", CalibrationSessions)
READINGS = web.AppKey("readings", ReadingRuntime)
DEVICE_RUNTIME = web.AppKey("device_runtime", DeviceRuntime)
EVENT_HUB = web.AppKey("event_hub", EventHub)
STREAMS = web.AppKey("streams", StreamService)
SYNC = web.AppKey("sync", SyncRuntime)
