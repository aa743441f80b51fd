"""A growing room's air for tests and the demo: lights and plants warm and moisten it, fans
exchange it with outside air.

First-order model, integrated in steps of at most one second:

    dT/dt = heat_load - exchange * fan * (T - T_outside)
    dRH/dt = moisture_load - exchange * fan * (RH - RH_outside)

with ``fan`` the fans' combined speed as a fraction (0..1 per fan) and ``exchange`` the share of
the room's air one fan at full speed replaces per second. Relative humidity is treated as a
conserved quantity (no coupling to temperature): crude, but enough to exercise a controller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.devices.simulator.mqtt import SimulatedMqttDevice

__all__ = ["RoomModel", "SimulatedRoom", "fan_percent"]


@dataclass
class RoomModel:
    """The air of one room; loads are per second, ``exchange`` per second at full fan speed."""

    temperature: float = 24.0
    humidity: float = 65.0
    outside_temperature: float = 16.0
    outside_humidity: float = 45.0
    heat_load: float = 0.01
    """°C per second the room warms with the fans off (lights on)."""
    moisture_load: float = 0.02
    """% RH per second transpiration adds with the fans off."""
    exchange: float = 0.004
    """Share of the room's air one fan at full speed replaces per second."""

    def step(self, seconds: float, fan: float) -> None:
        """Advance ``seconds`` with the fans at ``fan`` (sum of speed fractions)."""
        remaining = seconds
        while remaining > 0:
            dt = min(1.0, remaining)
            rate = self.exchange * max(0.0, fan)
            self.temperature += dt * (
                self.heat_load - rate * (self.temperature - self.outside_temperature)
            )
            self.humidity += dt * (
                self.moisture_load - rate * (self.humidity - self.outside_humidity)
            )
            self.humidity = min(100.0, max(0.0, self.humidity))
            remaining -= dt


def fan_percent(fan: SimulatedMqttDevice) -> int:
    """The speed a simulated fan is running at, 0 when it is switched off."""
    if "power" in fan.state and not fan.state["power"]:
        return 0
    return int(fan.state.get("fan_speed", 0))


class SimulatedRoom:
    """Drives a simulated sensor from a room model whose fans are simulated fan devices."""

    def __init__(
        self,
        model: RoomModel,
        fans: Sequence[SimulatedMqttDevice],
        sensor: SimulatedMqttDevice,
    ) -> None:
        self.model = model
        self._fans = tuple(fans)
        self._sensor = sensor
        self.reported: dict[str, float] = {}
        """The temperature and humidity the sensor last published."""

    def fan_speed(self) -> float:
        """The fans' combined speed as a sum of fractions (two fans at 50 % make 1.0)."""
        return sum(fan_percent(fan) for fan in self._fans) / 100.0

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass in the room, then publish what the sensor measures."""
        self.model.step(seconds, self.fan_speed())
        await self.report()

    async def report(self) -> None:
        """Publish the room's current temperature and humidity through the sensor."""
        self.reported = {
            "temperature": round(self.model.temperature, 2),
            "humidity": round(self.model.humidity, 2),
        }
        for metric, value in self.reported.items():
            self._sensor.set_reading(metric, value)
        await self._sensor.publish_telemetry()
