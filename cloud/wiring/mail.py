"""The cloud's SMTP settings, or None when no mail server is configured."""

from __future__ import annotations

from cloud.settings import CloudSettings
from farmkit.smtp import SmtpSettings, smtp_settings_of

__all__ = ["smtp_settings"]


def smtp_settings(settings: CloudSettings) -> SmtpSettings | None:
    """What CLOUD_SMTP_* configure."""
    return smtp_settings_of(settings)
