"""Typed application keys for the services handlers use (set by the app factory)."""

from __future__ import annotations

from aiohttp import web

from agent.clock import AgentClock
from agent.services.alerts.service import AlertService
from agent.services.calibration.service import CalibrationService
from agent.services.calibration.session import CalibrationSessions
from agent.services.climate.runtime import ClimateRuntime
from agent.services.climate.service import ClimateService
from agent.services.clock_watch import ClockWatch
from agent.services.control.actuators import ActuatorService
from agent.services.control.fans import ActuatorControl
from agent.services.control.schedules import ActuatorSchedules
from agent.services.devices.registry import DeviceService
from agent.services.devices.sensors import SensorService
from agent.services.discovery.found import FoundDevices
from agent.services.events.log import EventLog
from agent.services.events.service import EventService
from agent.services.grow_plans.harvest_watch import HarvestWatch
from agent.services.grow_plans.plans import GrowPlanService
from agent.services.health import HealthService
from agent.services.hierarchy.farms import FarmService
from agent.services.hierarchy.levels import HierarchyService
from agent.services.identity.auth_events import AuthEvents
from agent.services.identity.flows import (
    AgentAccountFlows,
    AgentApiKeys,
    AgentLogin,
    AgentMfa,
    AgentSessions,
)
from agent.services.identity.permissions import PermissionService
from agent.services.identity.sessions import IdentityService
from agent.services.identity.users import UserService
from agent.services.ingest.device_runtime import DeviceRuntime
from agent.services.ingest.reading_runtime import ReadingRuntime
from agent.services.live.fanout import EventFanout
from agent.services.notify.service import NotifyService
from agent.services.overview.service import OverviewService
from agent.services.streams.service import StreamService
from agent.settings import AgentSettings
from agent.store.db import Database
from agent.sync.runtime import SyncRuntime
from agent.web.foreground import Foreground
from integrations.home_assistant.live import HubStateStream
from integrations.home_assistant.service import HomeAutomation
from integrations.notify import NotifyDeliverer
from integrations.webhooks import WebhookDeliverer
from integrations.webhooks.agent_side.service import WebhookService

SETTINGS = web.AppKey("settings", AgentSettings)
FOREGROUND = web.AppKey("foreground", Foreground)
DATABASE = web.AppKey("database", Database)
FARMS = web.AppKey("farms", FarmService)
HIERARCHY = web.AppKey("hierarchy", HierarchyService)
IDENTITY = web.AppKey("identity", IdentityService)
AUTH_FLOWS = web.AppKey("auth_flows", AgentAccountFlows)
AUTH_EVENTS = web.AppKey("auth_events", AuthEvents)
MFA = web.AppKey("mfa", AgentMfa)
SESSIONS = web.AppKey("sessions", AgentSessions)
LOGIN = web.AppKey("login", AgentLogin)
API_KEYS = web.AppKey("api_keys", AgentApiKeys)
USERS = web.AppKey("users", UserService)
PERMISSIONS = web.AppKey("permissions", PermissionService)
STARTED_AT = web.AppKey("started_at", float)
HEALTH = web.AppKey("health", HealthService)
DEVICES = web.AppKey("devices", DeviceService)
FOUND = web.AppKey("found", FoundDevices)
SENSORS = web.AppKey("sensors", SensorService)
CALIBRATION = web.AppKey("calibration", CalibrationService)
CALIBRATION_SESSIONS = web.AppKey("calibration_sessions", CalibrationSessions)
READINGS = web.AppKey("readings", ReadingRuntime)
DEVICE_RUNTIME = web.AppKey("device_runtime", DeviceRuntime)
EVENT_FANOUT = web.AppKey("event_fanout", EventFanout)
STREAMS = web.AppKey("streams", StreamService)
SYNC = web.AppKey("sync", SyncRuntime)
CLOCK = web.AppKey("clock", AgentClock)
CLOCK_WATCH = web.AppKey("clock_watch", ClockWatch)
CLIMATE = web.AppKey("climate", ClimateService)
CLIMATE_RUNTIME = web.AppKey("climate_runtime", ClimateRuntime)
EVENT_LOG = web.AppKey("event_log", EventLog)
EVENTS = web.AppKey("events", EventService)
ALERTS = web.AppKey("alerts", AlertService)
ACTUATORS = web.AppKey("actuators", ActuatorService)
ACTUATOR_CONTROL = web.AppKey("actuator_control", ActuatorControl)
SCHEDULES = web.AppKey("schedules", ActuatorSchedules)
GROW_PLANS = web.AppKey("grow_plans", GrowPlanService)
OVERVIEW = web.AppKey("overview", OverviewService)
HARVEST_WATCH = web.AppKey("harvest_watch", HarvestWatch)
HOME_AUTOMATION = web.AppKey("home_automation", HomeAutomation)
HUB_STATE_STREAM = web.AppKey("hub_state_stream", HubStateStream)
WEBHOOKS = web.AppKey("webhooks", WebhookService)
WEBHOOK_DELIVERER = web.AppKey("webhook_deliverer", WebhookDeliverer)
NOTIFY = web.AppKey("notify", NotifyService)
NOTIFY_DELIVERER = web.AppKey("notify_deliverer", NotifyDeliverer)
