"""The farm's event log: recording, reading and acknowledging events, and their retention."""
