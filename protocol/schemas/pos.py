"""The POS provider integration's API models (docs/design.md section
9). Secrets go in, never out: a configuration answers only whether it holds them."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, Field, SecretStr, create_model, model_validator

from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, UtcDatetime, Uuid
from protocol.schemas.grow_plans import HarvestUnit

__all__ = [
    "POS_PAGES",
    "POS_RESOURCES",
    "CropMapping",
    "PosConfig",
    "PosConfigCreate",
    "PosConfigList",
    "PosConfigUpdate",
    "PosEnvironment",
    "PosJob",
    "PosListQuery",
    "PosObjectPage",
    "PosProviderError",
    "PosSyncKind",
    "PosSyncStarted",
    "PosSyncStatus",
    "PosTestConnection",
    "PosTestResult",
    "PosWebhookAck",
]

PosEnvironment = Literal["sandbox", "production"]
PosSyncKind = Literal["all", "customers", "orders", "payments", "products"]

ProviderId = Annotated[str, Field(min_length=1, max_length=192, pattern=r"^[A-Za-z0-9_:#.-]+$")]
Species = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_-]*$")]
Url = Annotated[str, Field(min_length=8, max_length=2048, pattern=r"^https?://[^\s]+$")]
Secret = Annotated[SecretStr, Field(min_length=1, max_length=2048)]


def _header_safe(token: SecretStr) -> SecretStr:
    # The token travels in an Authorization header: a control character (a newline, NUL, CR)
    # would split it or be refused by the HTTP client at every call. Visible ASCII only.
    if not all("!" <= c <= "~" for c in token.get_secret_value()):
        raise ValueError("must be visible ASCII characters only (no spaces or control characters)")
    return token


AccessToken = Annotated[Secret, AfterValidator(_header_safe)]
"""A provider access token: sent as ``Authorization: Bearer <token>``."""


HarvestAgents = Annotated[
    list[UUID],
    Field(
        max_length=100,
        description="Opt in to the harvests of these agents' farms: a harvest goes to the active"
        " configuration of its agent's owner, or of an owner who opted in for the agent or farm",
    ),
]
HarvestFarms = Annotated[
    list[UUID], Field(max_length=200, description="Opt in to the harvests of these farms")
]


class CropMapping(ApiModel):
    """Where a crop's harvest goes: a catalog item variation at a location.

    Name the crop by ``species`` (the agent's crop catalogue key) or one ``grow_plan_id``.
    ``unit`` must be the harvest's unit; the POS count grows by quantity x ``factor``.
    """

    species: Species | None = None
    grow_plan_id: UUID | None = None
    variation_id: ProviderId
    location_id: ProviderId
    unit: HarvestUnit
    factor: float = Field(1.0, gt=0, le=1_000_000, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one_crop(self) -> CropMapping:
        if (self.species is None) == (self.grow_plan_id is None):
            raise ValueError("name exactly one of species and grow_plan_id")
        return self


class PosConfigCreate(ApiModel):
    """POST /api/v1/pos/configs."""

    name: str = Field(min_length=1, max_length=200)
    environment: PosEnvironment = "sandbox"
    access_token: AccessToken
    webhook_signature_key: Secret | None = None
    notification_url: Url | None = None
    location_ids: list[ProviderId] = Field(default_factory=list, max_length=50)
    crop_mappings: list[CropMapping] = Field(default_factory=list, max_length=200)
    harvest_agent_ids: HarvestAgents = Field(default_factory=list)
    harvest_farm_ids: HarvestFarms = Field(default_factory=list)


class PosConfigUpdate(ApiModel):
    """PUT /api/v1/pos/configs/{config_id}: the fields given replace the stored ones; ``null``
    clears the signature key or the notification URL."""

    name: str | None = Field(None, min_length=1, max_length=200)
    environment: PosEnvironment | None = None
    access_token: AccessToken | None = None
    webhook_signature_key: Secret | None = None
    notification_url: Url | None = None
    location_ids: list[ProviderId] | None = Field(None, max_length=50)
    crop_mappings: list[CropMapping] | None = Field(None, max_length=200)
    harvest_agent_ids: HarvestAgents | None = None
    harvest_farm_ids: HarvestFarms | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> PosConfigUpdate:
        if not self.model_fields_set:
            raise ValueError("at least one field must be given")
        nullable = {"webhook_signature_key", "notification_url"}
        for name in self.model_fields_set - nullable:
            if getattr(self, name) is None:
                raise ValueError(f"{name}: may not be null")
        return self


class PosConfig(Schema):
    """A configuration as answered: never its secrets."""

    id: Uuid
    name: str
    environment: PosEnvironment
    has_access_token: bool
    has_webhook_signature_key: bool
    notification_url: str | None
    location_ids: list[str]
    crop_mappings: list[dict[str, Any]]
    harvest_agent_ids: list[str] = Field(
        description="Agents (besides the owner's own) whose farms' harvests it takes"
    )
    harvest_farm_ids: list[str] = Field(
        description="Farms (besides those of the owner's agents) whose harvests it takes"
    )
    merchant_id: str | None
    is_active: bool
    created_at: Timestamp
    updated_at: Timestamp


class PosConfigList(Schema):
    """GET /api/v1/pos/configs."""

    configs: list[PosConfig]
    total: int
    limit: int
    offset: int


class PosTestConnection(ApiModel):
    """POST /api/v1/pos/test-connection: a stored configuration, or credentials to try."""

    config_id: UUID | None = None
    environment: PosEnvironment | None = None
    access_token: AccessToken | None = None

    @model_validator(mode="after")
    def _one_source(self) -> PosTestConnection:
        if (self.config_id is None) == (self.access_token is None):
            raise ValueError("give config_id, or environment and access_token")
        return self


class PosProviderError(Schema):
    """What the provider answered when it refused (its own category and code)."""

    status: int | None
    category: str | None
    code: str | None
    detail: str


class PosTestResult(Schema):
    """What the provider said: the merchant and its locations, or its error."""

    ok: bool
    merchant: dict[str, Any] | None
    locations: list[dict[str, Any]]
    error: PosProviderError | None


class PosSyncStarted(Schema):
    """202 of POST /api/v1/pos/sync/{kind}/{config_id}: the job, new or already queued."""

    job_id: Uuid
    config_id: Uuid
    kind: PosSyncKind
    state: str


class PosJob(Schema):
    """A sync job's state, progress and timings."""

    id: Uuid
    kind: PosSyncKind
    trigger: str
    state: Literal["queued", "running", "succeeded", "failed"]
    steps: list[str]
    current_step: str | None
    pages: int
    records: int
    progress: dict[str, Any]
    """Per resource: pages and records applied."""
    error: str | None
    attempts: int
    created_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None
    updated_at: Timestamp


class PosSyncStatus(Schema):
    """GET /api/v1/pos/sync/status/{config_id}: recent jobs, newest first, and per resource
    the time of its last completed pull."""

    config_id: Uuid
    jobs: list[PosJob]
    last_synced_at: dict[str, Timestamp]


class PosListQuery(PageQuery):
    """Reads from the mirror: of ``config_id`` (default: the caller's active configuration),
    optionally one location and a time range on the objects' creation time."""

    config_id: UUID | None = None
    location_id: ProviderId | None = None
    begin_time: UtcDatetime | None = None
    end_time: UtcDatetime | None = None

    @model_validator(mode="after")
    def _range(self) -> PosListQuery:
        if self.begin_time and self.end_time and self.begin_time > self.end_time:
            raise ValueError("begin_time must not be after end_time")
        return self


class PosObjectPage(Schema):
    """A page of mirrored objects, as the provider sent them, under the resource's own key
    (``orders``, ``payments``, ...; see :data:`POS_PAGES`)."""

    config_id: Uuid
    total: int
    limit: int
    offset: int
    last_synced_at: Timestamp | None
    """When this resource was last pulled from the provider (null: never)."""


POS_RESOURCES: tuple[str, ...] = (
    "locations",
    "products",
    "customers",
    "orders",
    "payments",
    "refunds",
    "disputes",
    "payouts",
    "team_members",
    "inventory",
)

POS_PAGES: dict[str, type[PosObjectPage]] = {
    name: create_model(  # one model per list key, so the OpenAPI document names each
        "Pos" + "".join(part.title() for part in name.split("_")) + "Page",
        __base__=PosObjectPage,
        **{name: (list[dict[str, Any]], ...)},  # type: ignore[call-overload]
    )
    for name in POS_RESOURCES
}


class PosWebhookAck(Schema):
    """The webhook's 200: the event is stored (or was a duplicate) and will be applied."""

    received: bool
    duplicate: bool
