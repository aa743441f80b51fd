"""Outgoing webhooks in the agent: settings, deliveries and the test message (integrations/webhooks/
posts them)."""
