"""Async Python client for the vertical farm agent and cloud API (docs/client.md).

async with FarmClient("http://farm.local:8080", api_key="...") as client:
    async for farm in client.farms.iterate():
        print(farm.name)
"""

from farm_client.client import FarmClient
from farm_client.credentials import Tokens
from farm_client.errors import (
    FarmApiError,
    FarmClientError,
    FarmConnectionError,
    MfaRequired,
    StreamClosedError,
)
from farm_client.events import DeviceError, DeviceEvent, FarmStatus, Missed, Reading, StatusUpdate
from farm_client.stream import EventStream, Reconnect
from farm_client.transport import RetryPolicy
from protocol.schemas.actuators import FanSchedule

__all__ = [
    "DeviceError",
    "DeviceEvent",
    "EventStream",
    "FanSchedule",
    "FarmApiError",
    "FarmClient",
    "FarmClientError",
    "FarmConnectionError",
    "FarmStatus",
    "MfaRequired",
    "Missed",
    "Reading",
    "Reconnect",
    "RetryPolicy",
    "StatusUpdate",
    "StreamClosedError",
    "Tokens",
]
