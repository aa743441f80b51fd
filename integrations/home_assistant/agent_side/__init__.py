"""Home Assistant: MQTT discovery of the farm's devices."""
