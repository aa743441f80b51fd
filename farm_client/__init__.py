"""Async Python client for the vertical farm agent and cloud API (docs/client.md)."""
