"""The ingest pipeline: device messages in (MQTT, serial), calibrated readings out.

Above both devices and readings: it binds the registry's devices and feeds the reading writer."""
