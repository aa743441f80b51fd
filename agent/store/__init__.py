"""The agent's SQLite store: connection, migrations, and one module per aggregate."""
