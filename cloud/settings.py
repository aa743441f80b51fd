"""Cloud settings, from the environment (``CLOUD_*``); only the CLI reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from integrations.home_assistant.settings import HubSettings
from integrations.webhooks.settings import WebhookSettings
from protocol.http.forwarded import TrustedProxies

__all__ = ["CloudSettings"]


class CloudSettings(HubSettings, WebhookSettings, BaseSettings):
    """Everything the cloud service can be configured with; DSNs and keys are secrets."""

    model_config = SettingsConfigDict(env_prefix="CLOUD_", extra="forbid")

    owner_dsn: SecretStr = Field(description="Schema owner: runs the migrations, nothing else")
    app_dsn: SecretStr = Field(description="farm_app: every request acting for a user (RLS)")
    sync_dsn: SecretStr = Field(description="farm_sync: sync apply and pre-login lookups")
    db_io_timeout_s: float = Field(10.0, gt=0, le=300, description="Time limit of one query")
    db_pool_min: int = Field(1, ge=0, le=100, description="Connections kept open per role")
    db_pool_max: int = Field(10, ge=1, le=200, description="Connections at most per role")

    host: str = Field("127.0.0.1", description="Listen address (a reverse proxy fronts it)")
    port: int = Field(8000, ge=1, le=65535, description="Listen port")
    issuer: str = Field("farm-cloud", min_length=1, description="`iss` of the cloud's tokens")
    signing_key: SecretStr | None = Field(
        None, description="Ed25519 private key, PEM; takes precedence over signing_key_path"
    )
    signing_key_path: Path | None = Field(
        None, description="PEM file of the Ed25519 private key; created (mode 0600) if missing"
    )
    admin_email: str | None = Field(
        "admin@cloud.local",
        description="First admin, on an empty database; empty: create none",
    )
    admin_password: SecretStr | None = Field(
        None, description="First admin's password; generated and printed once when unset"
    )
    access_token_ttl_s: int = Field(3600, ge=60, le=86_400, description="Access token lifetime")
    refresh_token_ttl_s: int = Field(
        30 * 86_400, ge=3600, description="Session lifetime, extended by each refresh"
    )

    rate_limit_per_user: int = Field(100, ge=0, description="Requests a minute; 0 disables")
    rate_limit_per_premium_user: int = Field(
        1000, ge=0, description="Requests a minute for premium users and their API keys"
    )
    rate_limit_per_address: int = Field(100, ge=0, description="Anonymous requests an hour")

    trusted_proxies: str | None = Field(
        None,
        description="Comma-separated networks of the balancers and reverse proxies whose"
        " X-Forwarded-For / Forwarded headers name the client; unset: nobody's",
    )
    maintenance_interval_s: float = Field(
        3600.0,
        gt=0,
        description="How often the maintenance jobs run (once per period over all processes):"
        " reading partitions made ahead, retention, expired rate-limit windows",
    )
    readings_retention_days: int = Field(
        0,
        ge=0,
        description="Raw readings older than this are dropped a month at a time (their 1-minute"
        " and 1-hour rollups stay); 0 keeps them",
    )
    max_body_bytes: int = Field(1024 * 1024, ge=1024, description="Larger bodies get a 413")
    pairing_code_ttl_s: int = Field(24 * 3600, ge=60, description="How long a pairing code lives")
    sync_max_skew_s: float = Field(
        300.0, gt=0, description="A batch signed longer ago than this is refused as a replay"
    )
    sync_apply_concurrency: int = Field(
        2,
        ge=1,
        le=64,
        description="Batches one process applies at once; more wait their turn, bodies read",
    )
    sync_revoked_session_window_s: int = Field(
        30 * 86_400, ge=3600, description="How long revoked sessions are sent to agents"
    )
    ws_max_connections_per_user: int = Field(
        10, ge=1, description="Concurrent WebSocket connections of one user, all streams together"
    )
    ws_heartbeat_s: float = Field(20.0, gt=0, description="Idle seconds before a heartbeat")
    ws_queue_size: int = Field(
        1000, ge=1, description="Messages waiting for one slow client before some are dropped"
    )
    ws_auth_timeout_s: float = Field(5.0, gt=0, description="Wait for an auth message this long")
    ws_recheck_s: float = Field(
        5.0, gt=0, description="Seconds between re-checks of a stream's credentials and farms"
    )
    ws_send_timeout_s: float = Field(
        60.0, gt=0, description="A client that takes no data for this long is disconnected"
    )
    log_level: str = Field(
        "INFO", pattern="^(DEBUG|INFO|WARNING|ERROR)$", description="DEBUG, INFO, WARNING, ERROR"
    )
    log_format: Literal["text", "json"] = Field(
        "text", description="text, or json: one JSON object a line (journald, log shippers)"
    )

    # Identity flows: refresh, registration, password reset, MFA, login throttling.
    registration_enabled: bool = Field(True, description="Allow POST /auth/register")
    site_name: str = Field("Farm cloud", min_length=1, description="In mails and MFA apps")
    verify_token_ttl_s: int = Field(48 * 3600, ge=60, description="Email verification token")
    reset_token_ttl_s: int = Field(3600, ge=60, description="Password reset token")
    mfa_challenge_ttl_s: int = Field(300, ge=30, description="Login MFA challenge")
    login_failures_per_address: int = Field(20, ge=1, description="Per client, before a 429")
    login_throttle_per_account: int = Field(
        10, ge=1, description="Per account and client within the window, before a 429"
    )
    login_failure_window_s: int = Field(
        900, ge=1, description="Failures counted over this window; also the longest wait"
    )
    secret_key: SecretStr | None = Field(
        None,
        description="AES-256 key (URL-safe base64 of 32 bytes) for secrets at rest (MFA seeds,"
        " POS credentials); derived from the signing key when unset",
    )
    secret_key_path: Path | None = Field(
        None, description="File of that key; created (mode 0600) if missing"
    )
    smtp_host: str | None = Field(None, description="Mail server; unset: mail is not sent")
    smtp_port: int = Field(587, ge=1, le=65535, description="Mail server port")
    smtp_security: Literal["starttls", "tls", "none"] = Field(
        "starttls", description="starttls, tls (implicit, port 465) or none"
    )
    smtp_username: str | None = Field(None, description="Mail server login")
    smtp_password: SecretStr | None = Field(None, description="Mail server password")
    smtp_sender: str = Field("farm-cloud@localhost", description="From: address of mail")
    smtp_timeout_s: float = Field(15.0, gt=0, description="One message's time limit")
    metrics_token: SecretStr | None = Field(
        None, description="Bearer token that may read /metrics from any address"
    )
    metrics_allowed_networks: str = Field(
        "127.0.0.1/32,::1/128",
        description="Comma-separated networks that may read /metrics without the token",
    )

    # POS provider integration (docs/design.md section 9).
    pos_sandbox_url: str = Field(
        "https://connect.squareupsandbox.com",
        pattern=r"^https?://",
        description="The POS provider's sandbox API (a fake's URL to try it out)",
    )
    pos_production_url: str = Field(
        "https://connect.squareup.com",
        pattern=r"^https?://",
        description="The POS provider's production API",
    )
    pos_sync_interval_s: float = Field(
        900.0, ge=0, description="Incremental sync of each active POS configuration; 0 disables"
    )
    pos_job_workers: int = Field(
        2, ge=0, le=32, description="POS sync jobs this process runs at once; 0: no POS work"
    )
    pos_poll_interval_s: float = Field(
        1.0, gt=0, le=60, description="How often idle POS workers look for jobs and events"
    )
    pos_job_lease_s: float = Field(
        60.0, ge=1, description="A job whose worker is silent this long is taken over"
    )
    pos_request_timeout_s: float = Field(
        30.0, gt=0, le=300, description="Time limit of one request to the POS provider"
    )
    pos_retry_attempts: int = Field(
        6, ge=1, le=20, description="Tries of a POS request on 429, 5xx and timeouts"
    )
    pos_retry_max_s: float = Field(
        30.0, gt=0, description="Longest back-off between those tries (jittered)"
    )

    # Outgoing webhooks (issue 11)
    webhook_allow_private_targets: bool = Field(
        False,
        description="Let webhooks reach loopback, private and link-local addresses",
    )
    webhook_workers: int = Field(
        4, ge=0, le=64, description="Delivery loops of this process; 0: this process sends none"
    )
    # Notifications to people: farms whose agent went silent (docs/operations.md)
    notify_silent_after_s: float = Field(
        600.0,
        gt=0,
        description="An agent silent this long: its farms' contact points are told",
    )
    notify_poll_s: float = Field(
        5.0, gt=0, le=300, description="Seconds between looks for silent agents and due messages"
    )
    notify_batch: int = Field(20, ge=1, le=500, description="Messages one process sends at once")

    @field_validator("admin_email")
    @classmethod
    def _admin_email(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if "@" not in value:
            raise ValueError("not an e-mail address")
        return value.strip()

    @field_validator("trusted_proxies")
    @classmethod
    def _trusted_proxies(cls, value: str | None) -> str | None:
        TrustedProxies.parse(value or "")  # a bad entry is a ValueError naming it
        return value

    @model_validator(mode="after")
    def _has_key(self) -> CloudSettings:
        if self.signing_key is None and self.signing_key_path is None:
            raise ValueError("set CLOUD_SIGNING_KEY (PEM) or CLOUD_SIGNING_KEY_PATH")
        if self.db_pool_min > self.db_pool_max:
            raise ValueError("db_pool_min may not exceed db_pool_max")
        return self
