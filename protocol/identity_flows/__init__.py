"""The identity flows agent and cloud share, written once over store protocols: account flows
(registration, verification, reset), TOTP MFA and API keys. Each side supplies its stores."""
