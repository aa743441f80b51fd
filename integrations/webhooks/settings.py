"""Webhook delivery's settings, declared once for the agent's and the cloud's settings classes
(which inherit :class:`WebhookSettings`), and the delivery rules they make."""

from __future__ import annotations

from pydantic import BaseModel, Field

from farmkit.backoff import Backoff
from integrations.webhooks.deliverer import DeliveryPolicy

__all__ = ["WebhookSettings"]


class WebhookSettings(BaseModel):
    """How webhooks are delivered, retried, disabled and kept (``*_WEBHOOK_*``)."""

    webhook_timeout_s: float = Field(10.0, gt=0, le=60, description="Time limit of one delivery")
    webhook_workers: int = Field(4, ge=1, le=64, description="Delivery loops running at once")
    webhook_batch: int = Field(
        50, ge=1, le=500, description="Deliveries one loop posts at once at most"
    )
    webhook_poll_s: float = Field(
        1.0, gt=0, le=60, description="Seconds between looks for due deliveries"
    )
    webhook_retry_initial_s: float = Field(
        10.0, gt=0, description="First retry after this many seconds, doubling (with jitter)"
    )
    webhook_retry_max_s: float = Field(3600.0, gt=0, description="Longest wait between retries")
    webhook_retry_window_s: float = Field(
        86_400.0, ge=0, description="A delivery is retried this long before it is failed"
    )
    webhook_disable_after_s: float = Field(
        86_400.0, ge=0, description="A webhook whose every delivery failed this long is disabled"
    )
    webhook_delivery_retention_days: float | None = Field(
        30, gt=0, description="Delivered and failed deliveries are kept this long; unset: forever"
    )

    def delivery_policy(self) -> DeliveryPolicy:
        """The delivery rules these settings make."""
        keep_days = self.webhook_delivery_retention_days
        return DeliveryPolicy(
            timeout_s=self.webhook_timeout_s,
            batch=self.webhook_batch,
            workers=self.webhook_workers,
            poll_s=self.webhook_poll_s,
            retry=Backoff(self.webhook_retry_initial_s, self.webhook_retry_max_s),
            retry_window_s=self.webhook_retry_window_s,
            disable_after_s=self.webhook_disable_after_s,
            keep_s=None if keep_days is None else keep_days * 86_400.0,
        )
