"""Outgoing webhooks: their settings, deliveries and the test message (protocol/webhooks/ posts)."""
