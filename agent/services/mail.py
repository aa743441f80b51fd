"""Outgoing mail for the agent: the sender and message live in protocol/mail.py (shared with the
cloud); this module names them where the agent's wiring imports them."""

from __future__ import annotations

from protocol.mail import LogMailSender, MailMessage, MailSender

__all__ = ["LogMailSender", "MailMessage", "MailSender"]
