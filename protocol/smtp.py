"""Mail over SMTP (aiosmtplib) for the agent and the cloud: STARTTLS, implicit TLS or plain."""

from __future__ import annotations

from dataclasses import dataclass
from email.message import EmailMessage
from typing import Literal

import aiosmtplib

from protocol.mail import LogMailSender, MailMessage, MailSender

__all__ = ["SmtpMailSender", "SmtpSettings", "mail_check", "mail_sender"]


@dataclass(frozen=True)
class SmtpSettings:
    """Where and how to hand mail over."""

    host: str
    port: int
    security: Literal["starttls", "tls", "none"]
    sender: str
    username: str | None = None
    password: str | None = None
    timeout_s: float = 15.0

    def describe(self) -> str:
        """``smtp host:port (security)`` for health reports; no credentials."""
        return f"smtp {self.host}:{self.port} ({self.security})"


class SmtpMailSender:
    """Delivers each message in its own SMTP session (mail is rare: reset, verification)."""

    def __init__(self, settings: SmtpSettings) -> None:
        self._settings = settings

    async def send(self, message: MailMessage) -> None:
        """Deliver ``message`` or raise (``protocol.mail.deliver`` logs the failure)."""
        smtp = self._settings
        mail = EmailMessage()
        mail["From"] = smtp.sender
        mail["To"] = message.to
        mail["Subject"] = message.subject
        mail.set_content(message.body)
        await aiosmtplib.send(
            mail,
            hostname=smtp.host,
            port=smtp.port,
            username=smtp.username,
            password=smtp.password,
            use_tls=smtp.security == "tls",
            start_tls=smtp.security == "starttls",
            timeout=smtp.timeout_s,
        )


def mail_sender(smtp: SmtpSettings | None) -> MailSender:
    """SMTP when configured; else the sender that only notes unsent mail in the log."""
    return LogMailSender() if smtp is None else SmtpMailSender(smtp)


def mail_check(smtp: SmtpSettings | None) -> str:
    """The /healthz ``mail`` check."""
    return "not_configured" if smtp is None else smtp.describe()
