"""The cloud's WebSocket streams: what a committed sync batch tells them, how it reaches every
process, and whom RLS lets see it (the streams themselves are protocol.live)."""
