"""Outgoing mail (verification, password reset) behind a pluggable sender; agent and cloud.

With SMTP settings, :class:`farmkit.smtp.SmtpMailSender` delivers the messages. Without them
the default sender only notes in the log that a message was not sent: a mailed token is a
credential and never goes into a log.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "REGISTER_ACCEPTED",
    "RESET_ACCEPTED",
    "FlowPolicy",
    "LogMailSender",
    "MailMessage",
    "MailSender",
    "already_registered_mail",
    "deliver",
    "reset_mail",
    "verification_mail",
]

log = logging.getLogger(__name__)

RESET_ACCEPTED = "If the address has an account, a reset token is on its way"
"""The answer to a reset request, the same whether or not the address has an account."""

REGISTER_ACCEPTED = "Check your mail to finish the registration"
"""The answer to a registration, the same whether or not the address has an account: the mail
says which (a verification token, or a note that the address is registered already)."""


_MAIL_TIMEOUT_S = 15


@dataclass(frozen=True)
class FlowPolicy:
    """Whether anyone may register, and how long mailed tokens last."""

    registration_enabled: bool
    verify_token_ttl_s: int
    reset_token_ttl_s: int
    site_name: str


@dataclass(frozen=True)
class MailMessage:
    """One plain-text message."""

    to: str
    subject: str
    body: str


class MailSender(Protocol):
    """Delivers messages; implementations bound their own I/O with a timeout."""

    async def send(self, message: MailMessage) -> None:
        """Deliver ``message`` or raise."""
        ...


class LogMailSender:
    """Without a mail server: notes in the log that a message was not sent (never its body)."""

    async def send(self, message: MailMessage) -> None:
        """Log that ``message`` was not sent; its token stays out of the log."""
        log.warning(
            "mail to %s not sent (no SMTP server configured): %s", message.to, message.subject
        )


def verification_mail(to: str, site_name: str, token: str, ttl_s: int) -> MailMessage:
    """The message carrying an e-mail verification token."""
    return MailMessage(
        to=to,
        subject=f"{site_name}: verify your email address",
        body=(
            "Confirm this address by sending the token below to POST /auth/verify as"
            f' {{"token": "..."}}. It is valid for {ttl_s // 3600} hours.\n\n{token}\n'
        ),
    )


def already_registered_mail(to: str, site_name: str) -> MailMessage:
    """The message answering a registration for an address that has an account."""
    return MailMessage(
        to=to,
        subject=f"{site_name}: this address is registered already",
        body=(
            "Someone tried to register a new account with this address, which has one already."
            " If it was you, log in, or ask for a password reset at POST /auth/reset-password."
            " If it was not, you need do nothing.\n"
        ),
    )


def reset_mail(to: str, site_name: str, token: str, ttl_s: int) -> MailMessage:
    """The message carrying a password reset token."""
    return MailMessage(
        to=to,
        subject=f"{site_name}: reset your password",
        body=(
            "Someone asked to reset the password of this account. If it was you,"
            " send the token below with your new password to POST"
            ' /auth/reset-password/confirm as {"token": "...", "new_password": "..."}.'
            f" It works once, within {max(1, ttl_s // 60)} minutes.\n\n{token}\n"
        ),
    )


async def deliver(sender: MailSender, message: MailMessage) -> None:
    """Send ``message``, never failing the request that mails it: the user can ask again."""
    try:
        async with asyncio.timeout(_MAIL_TIMEOUT_S):
            await sender.send(message)
    except Exception:
        log.exception("could not send mail to %s", message.to)
    else:
        log.info("mail to %s handed over: %s", message.to, message.subject)
