"""The WebSocket streams: authentication, scope, one client's connection, the service."""
