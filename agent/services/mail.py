"""Outgoing mail (verification, password reset) behind a pluggable sender.

The agent ships no SMTP client: on a farm LAN the default sender writes each message to the log,
where the operator reads it (DESIGN.md section 4). A deployment with mail injects its own sender.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

__all__ = ["LogMailSender", "MailMessage", "MailSender"]

log = logging.getLogger(__name__)


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
    """Writes each message to the log (the default: no mail server needed)."""

    async def send(self, message: MailMessage) -> None:
        """Log the message, body included: it is how the operator receives it."""
        log.warning("mail to %s: %s\n%s", message.to, message.subject, message.body)
