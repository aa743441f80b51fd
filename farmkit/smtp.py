"""Mail over SMTP (aiosmtplib) for the agent and the cloud: STARTTLS, implicit TLS or plain."""

from __future__ import annotations

from dataclasses import dataclass
from email.message import EmailMessage
from typing import Literal, Protocol

import aiosmtplib
from pydantic import SecretStr

from farmkit.mail import LogMailSender, MailMessage, MailSender

__all__ = [
    "SmtpConfigured",
    "SmtpMailSender",
    "SmtpSettings",
    "mail_check",
    "mail_sender",
    "smtp_settings_of",
]


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


class SmtpConfigured(Protocol):
    """The SMTP fields both services' settings carry (FARM_SMTP_*, CLOUD_SMTP_*)."""

    @property
    def smtp_host(self) -> str | None: ...
    @property
    def smtp_port(self) -> int: ...
    @property
    def smtp_security(self) -> Literal["starttls", "tls", "none"]: ...
    @property
    def smtp_sender(self) -> str: ...
    @property
    def smtp_username(self) -> str | None: ...
    @property
    def smtp_password(self) -> SecretStr | None: ...
    @property
    def smtp_timeout_s(self) -> float: ...


def smtp_settings_of(settings: SmtpConfigured) -> SmtpSettings | None:
    """The SMTP settings a service's settings name, or None when no mail server is configured."""
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


class SmtpMailSender:
    """Delivers each message in its own SMTP session (mail is rare: reset, verification)."""

    def __init__(self, settings: SmtpSettings) -> None:
        self._settings = settings

    async def send(self, message: MailMessage) -> None:
        """Deliver ``message`` or raise (``farmkit.mail.deliver`` logs the failure)."""
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
