"""The Home Assistant integration in the agent: MQTT discovery of the farm's devices, the SQLite
stores of assignments and closes, the wiring and the handlers."""
