"""Mail over SMTP (aiosmtplib) for the agent and the cloud: STARTTLS, implicit TLS or plain."""

from __future__ import annotations

from dataclasses import dataclass
from email.message import EmailMessage
from typing import Literal

import aiosmtplib

from protocol.mail import MailMessage

__all__ = ["SmtpMailSender", "SmtpSettings"]


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
