"""Errors raised by device adapters.

DeviceError                 anything that went wrong talking to a device
├── DeviceUnavailable       the transport is down (broker gone, port unplugged)
├── DeviceTimeout           the device did not answer in time
├── DeviceRejected          the device answered with an error (e.g. EZO ``*ER``)
└── PayloadError            a message could not be decoded with the device's profile
ProfileError                a firmware profile file is invalid (names file and field)
"""

from __future__ import annotations


class DeviceError(Exception):
    """Base class for device communication failures."""


class DeviceUnavailable(DeviceError):
    """The transport to the device is down."""


class DeviceTimeout(DeviceError):
    """The device did not answer within the allowed time."""


class DeviceRejected(DeviceError):
    """The device answered that it refused or failed the command."""


class PayloadError(DeviceError):
    """A payload could not be decoded with the device's firmware profile."""


class ProfileError(Exception):
    """A firmware profile is invalid; the message names the file and the field."""

    def __init__(self, path: str, field: str, problem: str) -> None:
        super().__init__(f"{path}: {field}: {problem}")
        self.path = path
        self.field = field
        self.problem = problem
