"""Threshold alert rules and the alerts they raise."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import Field, FiniteFloat, model_validator

from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, Uuid
from protocol.schemas.events import Severity

__all__ = [
    "Alert",
    "AlertList",
    "AlertListQuery",
    "AlertRule",
    "AlertRuleBody",
    "AlertRuleList",
    "AlertRuleListQuery",
    "AlertState",
    "Direction",
]

AlertState = Literal["active", "cleared"]
Direction = Literal["above", "below"]

_WEEK_S = 7 * 86_400


class AlertRuleBody(ApiModel):
    """POST and PUT /alert-rules: a device's metric beyond ``above`` and/or ``below`` for at
    least ``min_duration_s`` raises an alert; it clears once back inside by ``hysteresis``."""

    device_id: UUID
    metric: str = Field(min_length=1, max_length=64)
    name: str = Field("", max_length=200)
    above: FiniteFloat | None = None
    below: FiniteFloat | None = None
    hysteresis: FiniteFloat = Field(0.0, ge=0)
    min_duration_s: FiniteFloat = Field(0.0, ge=0, le=_WEEK_S)
    severity: Severity = "warning"
    enabled: bool = True

    @model_validator(mode="after")
    def _thresholds(self) -> AlertRuleBody:
        if self.above is None and self.below is None:
            raise ValueError("give above, below or both")
        # The clearing bands must not overlap, or clearing one alert would raise the other.
        above, below, band = self.above, self.below, self.hysteresis
        if above is not None and below is not None and below + band >= above - band:
            raise ValueError("below + hysteresis must be less than above - hysteresis")
        return self


class AlertRule(Schema):
    """A stored rule; ``farm_id`` is the device's farm."""

    id: Uuid
    farm_id: Uuid
    device_id: Uuid
    metric: str
    name: str
    above: float | None
    below: float | None
    hysteresis: float
    min_duration_s: float
    severity: str
    enabled: bool
    created_at: Timestamp
    updated_at: Timestamp


class AlertRuleList(Schema):
    """GET /alert-rules."""

    alert_rules: list[AlertRule]
    total: int
    limit: int
    offset: int


class AlertRuleListQuery(PageQuery):
    """Query of GET /alert-rules: optional farm and device filters."""

    farm_id: UUID | None = None
    device_id: UUID | None = None


class Alert(Schema):
    """An alert a rule raised; ``raised_at``/``cleared_at`` are the readings' own times."""

    id: Uuid
    rule_id: Uuid | None
    farm_id: Uuid
    device_id: Uuid
    metric: str
    direction: Direction
    threshold: float
    severity: str
    state: AlertState
    raised_at: Timestamp
    raised_value: float
    cleared_at: Timestamp | None
    cleared_value: float | None
    cleared_reason: str | None


class AlertList(Schema):
    """GET /alerts, newest first."""

    alerts: list[Alert]
    total: int
    limit: int
    offset: int


class AlertListQuery(PageQuery):
    """Query of GET /alerts: ``state=active`` is what a client needs on connecting."""

    state: AlertState | None = None
    farm_id: UUID | None = None
    device_id: UUID | None = None
    q: str | None = Field(
        None, max_length=200, description="Metric, severity or the device's name contains this"
    )
