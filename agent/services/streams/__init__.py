"""The agent's WebSocket streams: its visibility rule and reading feed (the rest: protocol.live)."""
