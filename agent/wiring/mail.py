"""Which mail sender the agent uses: SMTP when configured, else none (said at start-up)."""

from __future__ import annotations

from agent.settings import AgentSettings
from farmkit.mail import MailSender
from farmkit.smtp import SmtpSettings, smtp_settings_of
from farmkit.smtp import mail_sender as sender_for

__all__ = ["mail_sender", "smtp_settings"]


def smtp_settings(settings: AgentSettings) -> SmtpSettings | None:
    """What FARM_SMTP_* configure, or None when no mail server is configured."""
    return smtp_settings_of(settings)


def mail_sender(settings: AgentSettings) -> MailSender:
    """The sender for verification and reset mail."""
    return sender_for(smtp_settings(settings))
