"""Notifications to people, written once for the agent and the cloud (the store is what differs).

- :mod:`.catalogue`: the event kinds and severities a rule chooses.
- :mod:`.sender`: one message to one contact point through Apprise, or SMTP for ``mailto:``.
- :mod:`.message`: the text: what, where, value against threshold, since when, link.
- :mod:`.quiet`: quiet hours.
- :mod:`.deliverer`: the loop that plans repeats and escalations and sends the outbox of a
  :class:`NotifyStore`.
"""

from integrations.notify.ack_links import AckLinks, LinkRefused
from integrations.notify.catalogue import REPEATABLE, SEVERITIES, NotifyKind
from integrations.notify.deliverer import (
    DueNotification,
    NotifyDeliverer,
    NotifyPolicy,
    NotifyStore,
    Settled,
)
from integrations.notify.message import Message, Where, compose, test_message
from integrations.notify.quiet import parse_hhmm, quiet_until
from integrations.notify.sender import ContactSender, Outcome, service_of, url_problem

__all__ = [
    "REPEATABLE",
    "SEVERITIES",
    "AckLinks",
    "ContactSender",
    "DueNotification",
    "LinkRefused",
    "Message",
    "NotifyDeliverer",
    "NotifyKind",
    "NotifyPolicy",
    "NotifyStore",
    "Outcome",
    "Settled",
    "Where",
    "compose",
    "parse_hhmm",
    "quiet_until",
    "service_of",
    "test_message",
    "url_problem",
]
