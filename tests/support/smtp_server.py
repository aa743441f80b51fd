"""A local SMTP server (aiosmtpd) that keeps what it receives, for mail tests."""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller

from tests.support.mosquitto import free_port

__all__ = ["Inbox", "smtp_server"]


class Inbox:
    """Messages received, parsed."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        """aiosmtpd's hook for a message."""
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append(parsed)
        return "250 OK"

    def token_to(self, address: str) -> str:
        """The token (last line of the body) of the newest message to ``address``."""
        mine = [m for m in self.messages if m["To"] == address]
        assert mine, f"no mail to {address}: {[m['To'] for m in self.messages]}"
        body = mine[-1].get_body()
        assert body is not None
        return str(body.get_content()).strip().splitlines()[-1]


@contextmanager
def smtp_server() -> Iterator[tuple[int, Inbox]]:
    """An SMTP server on 127.0.0.1 (no TLS) for the block: (port, inbox)."""
    inbox = Inbox()
    port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, inbox
    finally:
        controller.stop()
