"""The agent's HTTP surface: thin handlers that call services."""
