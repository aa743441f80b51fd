"""Identity: sessions, MFA, account flows, users, API keys and per-farm permissions."""
