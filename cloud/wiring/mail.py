"""The cloud's SMTP settings, or None when no mail server is configured."""

from __future__ import annotations

from cloud.settings import CloudSettings
from protocol.smtp import SmtpSettings

__all__ = ["smtp_settings"]


def smtp_settings(settings: CloudSettings) -> SmtpSettings | None:
    """What CLOUD_SMTP_* configure."""
    if not settings.smtp_host:
        return None
    password = settings.smtp_password
    return SmtpSettings(
        host=settings.smtp_host,
        port=settings.smtp_port,
        security=settings.smtp_security,
        sender=settings.smtp_sender,
        username=settings.smtp_username,
        password=None if password is None else password.get_secret_value(),
        timeout_s=settings.smtp_timeout_s,
    )
