"""Small utilities both services use that are not part of the wire contract (docs/design.md
section 2): retries, secrets at rest, mail, logs, tasks, time formats, migrations. This package
imports neither the agent nor the cloud."""
