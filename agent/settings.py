"""Agent settings: environment (``FARM_*``) over ``agent.toml`` over embedded defaults."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from integrations.home_assistant.settings import HubSettings
from integrations.webhooks.settings import WebhookSettings

__all__ = ["AgentSettings"]

DEFAULT_CONFIG_FILE = Path("/etc/farm-agent/agent.toml")
# The profiles shipped inside the package (package data: a wheel carries them).
DEFAULT_PROFILES_DIR = Path(__file__).resolve().parent / "firmware_profiles"


class AgentSettings(HubSettings, WebhookSettings, BaseSettings):
    """Everything the agent can be configured with; see README "Configuration"."""

    model_config = SettingsConfigDict(
        env_prefix="FARM_", extra="forbid", toml_file=DEFAULT_CONFIG_FILE
    )

    state_dir: Path = Field(Path("state"), description="Where the database and keys live")
    host: str = Field("0.0.0.0", description="Address the API listens on (the farm LAN)")
    port: int = Field(8080, ge=1, le=65535, description="Port the API listens on")
    farm_name: str = Field("Farm agent", description="Issuer name in tokens and docs title")

    admin_email: str = Field("admin@farm.local", description="First admin, on an empty database")
    admin_password: SecretStr | None = Field(
        None, description="First admin's password; generated and printed once when unset"
    )
    registration_enabled: bool = Field(True, description="Allow /auth/register")
    access_token_ttl_s: int = Field(3600, ge=60, le=86_400, description="Access token lifetime")
    refresh_token_ttl_s: int = Field(
        30 * 86_400, ge=3600, description="Session lifetime, extended by each refresh"
    )

    rate_limit_per_user: int = Field(100, ge=0, description="Requests a minute; 0 disables")
    rate_limit_per_premium_user: int = Field(
        1000, ge=0, description="Requests a minute for premium users and their API keys"
    )
    rate_limit_per_address: int = Field(100, ge=0, description="Anonymous requests an hour")
    login_failures_per_account: int = Field(
        5, ge=1, description="Failures of one account from one address before it waits"
    )
    login_failures_per_address: int = Field(
        20, ge=1, description="Failures from one address, all accounts together"
    )
    login_failure_window_s: int = Field(
        900, ge=1, description="Failures counted over this window; also the longest wait"
    )
    verify_token_ttl_s: int = Field(48 * 3600, ge=60, description="Email verification token")
    reset_token_ttl_s: int = Field(3600, ge=60, description="Password reset token")
    mfa_challenge_ttl_s: int = Field(300, ge=30, description="Login MFA challenge")

    max_body_bytes: int = Field(1024 * 1024, ge=1024, description="Larger bodies get a 413")

    sync_enabled: bool = Field(True, description="Upload to the cloud once paired")
    sync_batch_max_records: int = Field(25_000, ge=1, description="Outbox rows per batch")
    sync_batch_max_bytes: int = Field(
        2 * 1024 * 1024,
        ge=1024,
        description="Batch JSON bytes (before gzip) until the cloud announces its limit",
    )
    sync_batch_max_body_bytes: int = Field(
        768 * 1024,
        ge=1024,
        description="Batch body bytes (gzip) until the cloud announces its limit",
    )
    sync_probe_interval_s: float = Field(
        5.0, gt=0, description="While the cloud is unreachable, check for it this often"
    )
    sync_interval_s: float = Field(5.0, gt=0, description="Pause between uploads when caught up")
    sync_heartbeat_s: float = Field(
        4.0,
        gt=0,
        le=300,
        description="With nothing to send, ask for a newer identity delta this often",
    )
    sync_backoff_initial_s: float = Field(1.0, gt=0, description="First retry delay")
    sync_backoff_max_s: float = Field(300.0, gt=0, description="Retry back-off cap (jittered)")
    sync_request_timeout_s: float = Field(30.0, gt=0, description="One upload's time limit")
    outbox_max_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1024,
        description="Beyond it, old raw readings become 1-minute rollups, then those hourly ones",
    )
    outbox_min_free_disk_bytes: int = Field(
        256 * 1024 * 1024,
        ge=0,
        description="Under this much free disk the outbox compacts the same way",
    )

    profiles_dir: Path = Field(
        DEFAULT_PROFILES_DIR, description="Firmware profiles (*.toml); the shipped set by default"
    )
    mqtt_enabled: bool = Field(True, description="Talk to MQTT devices through mqtt_host")
    mqtt_host: str = Field("127.0.0.1", description="MQTT broker address")
    mqtt_port: int = Field(1883, ge=1, le=65535, description="MQTT broker port")
    mqtt_client_id: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description=(
            "Client id on the broker; the default comes from the state directory's instance-id"
            " file: stable (the broker keeps the session), and another agent's differs"
        ),
    )
    mqtt_username: str | None = Field(None, description="Broker user, when it requires one")
    mqtt_password: SecretStr | None = Field(None, description="Broker password")
    ha_discovery_enabled: bool = Field(
        True, description="Publish Home Assistant MQTT discovery and take its commands"
    )
    ha_discovery_prefix: str = Field(
        "homeassistant",
        pattern=r"^[^#+\s]+$",
        max_length=100,
        description="Home Assistant's discovery prefix",
    )
    ha_discovery_base_topic: str = Field(
        "farm-agent",
        pattern=r"^[^#+\s]+$",
        max_length=100,
        description="Topic root of the state and command topics the discovery advertises",
    )
    serial_enabled: bool = Field(True, description="Open and poll registered serial devices")
    serial_poll_interval_s: float = Field(
        10.0, gt=0, le=3600, description="Seconds between readings of a serial sensor"
    )
    simulate_devices: bool = Field(
        False,
        description=(
            "Demo: simulated devices on the first farm, on a private broker unless"
            " FARM_MQTT_HOST or FARM_MQTT_PORT names one"
        ),
    )

    reading_batch_interval_s: float = Field(
        0.75,
        gt=0,
        le=60,
        description="Longest wait before queued readings are committed while a tablet watches"
        " readings live",
    )
    reading_unwatched_batch_interval_s: float = Field(
        2.0,
        gt=0,
        le=60,
        description="Longest wait before queued readings are committed while no tablet watches"
        " them live (fewer commits: less written to the SD card)",
    )
    reading_max_batch: int = Field(
        200,
        ge=1,
        description="Readings per commit at most while API requests come (a command waits for"
        " the commit running)",
    )
    reading_quiet_batch: int = Field(
        2000,
        ge=1,
        description="Readings per commit at most while no API request came for a few seconds",
    )
    reading_queue_size: int = Field(
        20_000, ge=1, description="Readings waiting for a commit before new ones are dropped"
    )
    reading_clock_skew_s: float = Field(
        2.0, ge=0, description="Device and receive times further apart are both kept"
    )
    reading_max_clock_ahead_s: float = Field(
        86_400,
        gt=0,
        description="Device times further ahead are replaced by the receive time, once the"
        " agent's clock is set or the cloud's time known",
    )
    clock_sync_source: str = Field(
        "auto",
        min_length=1,
        description="How the agent knows its clock is set: auto (systemd-timesyncd's flag file"
        " where timesyncd runs, else the kernel's adjtimex status), kernel, assume (a machine"
        " with a real-time clock), or the path of a file that exists once the clock is set",
    )
    retention_raw_days: float | None = Field(30, gt=0, description="Raw readings; None: forever")
    retention_minute_days: float | None = Field(365, gt=0, description="1-minute rollups")
    retention_hour_days: float | None = Field(None, gt=0, description="Hourly rollups")
    retention_chunk_rows: int = Field(5000, ge=1, description="Rows deleted per transaction")
    retention_interval_s: float = Field(3600, gt=0, description="Seconds between pruning runs")
    reading_point_budget: int = Field(1000, ge=10, description="Default points per series query")
    reading_max_point_budget: int = Field(10_000, ge=10, description="Most points a query asks")
    sample_data: bool = Field(False, description="Create a sample farm hierarchy when empty")
    log_level: str = Field(
        "INFO", pattern="^(DEBUG|INFO|WARNING|ERROR)$", description="DEBUG, INFO, WARNING, ERROR"
    )
    memory_trim_interval_s: float = Field(
        30.0, gt=0, description="How often freed heap memory is handed back to the system"
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

    # Climate control (issue 4)
    climate_interval_s: float = Field(
        10.0, gt=0, description="Seconds between steps of the climate loop"
    )

    # Live stream latency (issue 4): group commit of readings
    reading_min_commit_interval_s: float = Field(
        0.02, ge=0, le=60, description="Seconds between reading commits at least (bounds fsyncs)"
    )

    # SD card wear (issue 25): readings are staged in arrival order and folded in large batches
    reading_fold_interval_s: float = Field(
        1800,
        ge=0,
        le=86_400,
        description="Seconds between folds of staged readings into the bucketed tables: a fold"
        " runs a minute after each 30-minute time bucket ends, or after every so many buckets"
        " when this is longer, and folds whole buckets; 0: no stage, each batch is written into"
        " them",
    )
    reading_fold_rows: int = Field(
        200_000,
        ge=1,
        description="Staged readings of time buckets that have ended that start a fold early (a"
        " backlog); the bucket under way stays staged",
    )
    reading_commit_rows: int = Field(
        256,
        ge=1,
        description="Readings a batch waits for (up to the batch interval) before it commits",
    )

    # Event log and threshold alerts (issues 4 and 5)
    event_retention_days: float | None = Field(
        365, gt=0, description="Keep events this many days; unset keeps them forever"
    )
    event_retention_interval_s: float = Field(3600, gt=0, description="Seconds between prunes")
    event_queue_size: int = Field(10_000, ge=1, description="Events waiting to be written at most")
    event_max_batch: int = Field(500, ge=1, description="Events written per transaction at most")
    alert_queue_size: int = Field(
        10_000, ge=1, description="Committed readings waiting for the alert evaluator at most"
    )

    # Actuator control and schedules (issue 4)
    actuator_command_timeout_s: float = Field(
        10.0, gt=0, le=120, description="Wait this long for an actuator to confirm a command"
    )
    timezone: str = Field(
        "UTC", description="IANA time zone of schedules and plan days (checked at start-up)"
    )

    # Grow plans (issue 4)
    grow_plan_check_interval_s: float = Field(
        300.0, gt=0, description="Seconds between checks for plans that reached harvest day"
    )
    grow_plan_adherence_points: int = Field(
        1000, ge=10, le=10_000, description="Point budget per sensor for a stage's adherence"
    )
    crop_catalogue_path: Path | None = Field(
        None, description="A crop catalogue TOML replacing the one shipped with the agent"
    )
    log_format: Literal["text", "json"] = Field(
        "text", description="text, or json: one JSON object a line (journald, log shippers)"
    )
    disk_low_free_bytes: int = Field(
        512 * 1024 * 1024,
        ge=0,
        description="Room under this (free disk, or under database_max_bytes) is a disk_low event,"
        " degraded health, and the agent frees space (docs/operations.md)",
    )
    database_max_bytes: int | None = Field(
        None,
        ge=1024 * 1024,
        description="Hard cap on the database file; at it, writes wait as on a full disk;"
        " unset: the disk is the limit",
    )
    reclaim_raw_after_days: float = Field(
        7.0,
        gt=0,
        description="Under the watermark, raw readings older than this go first (their 1-minute"
        " and hourly rollups stay)",
    )
    disk_check_interval_s: float = Field(60.0, gt=0, description="Seconds between disk checks")
    wal_checkpoint_interval_s: float = Field(
        1800.0,
        gt=0,
        description="Seconds between WAL checkpoints (the WAL is truncated); each one copies"
        " the pages rewritten since into the database, so fewer write less to the SD card",
    )
    backup_dir: Path | None = Field(
        None, description="Automatic backups go here; unset: no automatic backups"
    )
    backup_interval_s: float = Field(86_400.0, ge=60, description="Seconds between backups")
    backup_keep: int = Field(7, ge=1, description="Automatic backups kept; older ones deleted")
    metrics_token: SecretStr | None = Field(
        None, description="Bearer token that may read /metrics from any address"
    )
    metrics_allowed_networks: str = Field(
        "127.0.0.1/32,::1/128",
        description="Comma-separated networks that may read /metrics without the token",
    )
    smtp_host: str | None = Field(None, description="Mail server; unset: mail is not sent")
    smtp_port: int = Field(587, ge=1, le=65535, description="Mail server port")
    smtp_security: Literal["starttls", "tls", "none"] = Field(
        "starttls", description="starttls, tls (implicit, port 465) or none"
    )
    smtp_username: str | None = Field(None, description="Mail server login")
    smtp_password: SecretStr | None = Field(None, description="Mail server password")
    smtp_sender: str = Field("farm-agent@localhost", description="From: address of mail")
    smtp_timeout_s: float = Field(15.0, gt=0, description="One message's time limit")

    # Outgoing webhooks (issue 11): any address is allowed, the LAN is the agent's job

    # Notifications to people (contact points through Apprise; docs/operations.md)
    notify_public_url: str | None = Field(
        None, description="The web app's address for links in notifications; unset: no link"
    )
    notify_poll_s: float = Field(
        0.5, gt=0, le=60, description="Seconds between looks for due notifications"
    )
    notify_batch: int = Field(
        32, ge=1, le=500, description="Notifications being sent at once at most"
    )
    notify_retry_initial_s: float = Field(
        10.0, gt=0, description="First notification retry after this many seconds, doubling"
    )
    notify_retry_max_s: float = Field(
        600.0, gt=0, description="Longest wait between notification retries"
    )
    notify_retry_window_s: float = Field(
        86_400.0, ge=0, description="A notification is retried this long before it is failed"
    )
    notify_failing_event_after_s: float = Field(
        3600.0, ge=0, description="A contact point failing this long raises an event"
    )
    notify_handover_after_s: float | None = Field(
        600.0,
        ge=0,
        description="Paired: a message not delivered this long is handed to the cloud to send;"
        " unset: never",
    )

    @field_validator("metrics_allowed_networks")
    @classmethod
    def _networks(cls, value: str) -> str:
        for part in value.split(","):
            if part.strip():
                ipaddress.ip_network(part.strip())  # a ValueError names the bad entry
        return value

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, name: str) -> str:
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise ValueError(f"{name!r} is not an IANA time zone (e.g. Europe/Berlin)") from None
        return name

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Init arguments, then environment, then the TOML file."""
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))

    @property
    def database_path(self) -> Path:
        """The SQLite file."""
        return self.state_dir / "agent.db"

    @property
    def signing_key_path(self) -> Path:
        """The agent's Ed25519 token-signing key."""
        return self.state_dir / "signing_key.pem"
