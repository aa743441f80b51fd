"""Device simulators built on the firmware profiles (MQTT here; serial EZO in ``ezo``)."""

from agent.devices.simulator.mqtt import SimulatedMqttDevice

__all__ = ["SimulatedMqttDevice"]
