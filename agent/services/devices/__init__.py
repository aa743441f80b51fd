"""The device registry: registration rules, its views, the sensor view, simulated devices."""
