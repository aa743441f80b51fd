"""Typed application keys for the services handlers use (set by the app factory)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from agent.services.calibration import CalibrationService
from agent.services.calibration_session import CalibrationSessions
from agent.services.devices import DeviceService
from agent.services.farms import FarmService
from agent.services.health import HealthService
from agent.services.hierarchy import HierarchyService
from agent.services.identity import IdentityService
from agent.services.sensors import SensorService
from agent.settings import AgentSettings
from agent.store.db import Database

SETTINGS = web.AppKey("settings", AgentSettings)
DATABASE = web.AppKey("database", Database)
FARMS = web.AppKey("farms", FarmService)
HIERARCHY = web.AppKey("hierarchy", HierarchyService)
IDENTITY = web.AppKey("identity", IdentityService)
OPENAPI = web.AppKey("openapi", dict[str, Any])
STARTED_AT = web.AppKey("started_at", float)
HEALTH = web.AppKey("health", HealthService)
DEVICES = web.AppKey("devices", DeviceService)
SENSORS = web.AppKey("sensors", SensorService)
CALIBRATION = web.AppKey("calibration", CalibrationService)
CALIBRATION_SESSIONS = web.AppKey("calibration_sessions", CalibrationSessions)
