"""The cloud on an embedded default: a private PostgreSQL in a local directory (``farm-cloud
dev``), for trying the cloud out and for the test suite's throw-away clusters."""
