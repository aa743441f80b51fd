"""Outgoing webhooks, written once for the agent and the cloud (the store is what differs).

- :mod:`.catalogue`: the event types receivers subscribe to, by category (docs/design.md section 9).
- :mod:`.signing`: ``whsec_`` secrets and Standard Webhooks signatures.
- :mod:`.targets`: the URL's form and the address policy (SSRF) applied where posts connect.
- :mod:`.sender`: one signed POST with a time limit and no redirects, as an :class:`Attempt`.
- :mod:`.deliverer`: the loops that claim, post and settle deliveries of a
  :class:`DeliveryStore`, with retry and disable rules; :mod:`.health` a batch's verdicts as
  each webhook's health; :mod:`.settings` the delivery settings both sides inherit.
- :mod:`.routes` and :mod:`.schemas`: the API; ``agent_side`` and ``cloud_side`` each side's
  service, store, wiring and handlers.

Errors: :class:`SecretError` (a malformed secret, a ``ValueError``) and
:class:`TargetRefused` (an address the policy refuses, an ``OSError``); a receiver's failure is
never raised, it is an :class:`Attempt` that failed.
"""

from integrations.webhooks.catalogue import (
    CATEGORIES,
    EVENT_KINDS,
    TEST_EVENT,
    EventCategory,
    WebhookEventType,
)
from integrations.webhooks.deliverer import (
    ClaimedBatch,
    DeliveryPolicy,
    DeliveryStore,
    Verdict,
    WebhookDeliverer,
)
from integrations.webhooks.payloads import test_body
from integrations.webhooks.sender import Attempt, DueDelivery, WebhookSender, open_session
from integrations.webhooks.signing import SecretError, check_secret, new_secret, signed_headers
from integrations.webhooks.targets import AddressPolicy, TargetRefused, check_target, url_problem

__all__ = [
    "CATEGORIES",
    "EVENT_KINDS",
    "TEST_EVENT",
    "AddressPolicy",
    "Attempt",
    "ClaimedBatch",
    "DeliveryPolicy",
    "DeliveryStore",
    "DueDelivery",
    "EventCategory",
    "SecretError",
    "TargetRefused",
    "Verdict",
    "WebhookDeliverer",
    "WebhookEventType",
    "WebhookSender",
    "check_secret",
    "check_target",
    "new_secret",
    "open_session",
    "signed_headers",
    "test_body",
    "url_problem",
]
