"""Outgoing webhooks as the cloud serves them: its wiring, routes, service and outbox."""
