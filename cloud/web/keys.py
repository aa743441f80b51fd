"""Typed application keys for what handlers use (set by the app factory)."""

from __future__ import annotations

from aiohttp import web

from cloud.services.devices import DeviceService
from cloud.services.events import EventService
from cloud.services.farms import FarmService
from cloud.services.health import HealthService
from cloud.services.identity import IdentityService
from cloud.services.pairing import PairingService
from cloud.services.readings import ReadingService
from cloud.services.sync import SyncService
from cloud.settings import CloudSettings
from cloud.store.db import Database
from protocol.schemas.jwks import JwkSet

SETTINGS = web.AppKey("settings", CloudSettings)
DATABASE = web.AppKey("database", Database)
IDENTITY = web.AppKey("identity", IdentityService)
JWKS = web.AppKey("jwks", JwkSet)
FARMS = web.AppKey("farms", FarmService)
DEVICES = web.AppKey("devices", DeviceService)
READINGS = web.AppKey("readings", ReadingService)
EVENTS = web.AppKey("events", EventService)
HEALTH = web.AppKey("health", HealthService)
PAIRING = web.AppKey("pairing", PairingService)
SYNC = web.AppKey("sync", SyncService)
