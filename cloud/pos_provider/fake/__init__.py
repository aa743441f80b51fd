"""An in-repo fake of the POS provider, following its documented behaviour (Square v2): the list
endpoints and their page limits, opaque cursors that must be sent with the original query, the
``{"errors": [...]}`` body and its categories, ``RATE_LIMITED`` 429s and 5xx on demand, token
expiry, idempotent inventory changes, and a webhook sender that signs like the provider.

Run by hand with ``farm-cloud fake-pos``; tests build it with :func:`fake_app`.
"""

from cloud.pos_provider.fake.app import fake_app
from cloud.pos_provider.fake.merchant import FakeMerchant, Fault
from cloud.pos_provider.fake.webhooks import send_event, webhook_event

__all__ = ["FakeMerchant", "Fault", "fake_app", "send_event", "webhook_event"]
