"""Which mail sender the agent uses: SMTP when configured, else none (said at start-up)."""

from __future__ import annotations

from agent.settings import AgentSettings
from protocol.mail import MailSender
from protocol.smtp import SmtpSettings
from protocol.smtp import mail_sender as sender_for

__all__ = ["mail_sender", "smtp_settings"]


def smtp_settings(settings: AgentSettings) -> SmtpSettings | None:
    """The SMTP settings, or None when no mail server is configured."""
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


def mail_sender(settings: AgentSettings) -> MailSender:
    """The sender for verification and reset mail."""
    return sender_for(smtp_settings(settings))
