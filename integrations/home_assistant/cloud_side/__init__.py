"""The Home Assistant integration as the cloud serves it: its wiring, routes, store and farm
check."""
