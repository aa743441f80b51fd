"""Agent settings: environment (``FARM_*``) over ``agent.toml`` over embedded defaults."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

__all__ = ["AgentSettings"]

DEFAULT_CONFIG_FILE = Path("/etc/farm-agent/agent.toml")


class AgentSettings(BaseSettings):
    """Everything the agent can be configured with; see README "Configuration"."""

    model_config = SettingsConfigDict(
        env_prefix="FARM_", extra="forbid", toml_file=DEFAULT_CONFIG_FILE
    )

    state_dir: Path = Field(Path("state"), description="Where the database and keys live")
    host: str = Field("0.0.0.0", description="Address the API listens on (the farm LAN)")
    port: int = Field(8080, ge=1, le=65535)
    farm_name: str = Field("Farm agent", description="Issuer name in tokens and docs title")

    admin_email: str = Field("admin@farm.local", description="First admin, on an empty database")
    admin_password: SecretStr | None = Field(
        None, description="First admin's password; generated and printed once when unset"
    )
    registration_enabled: bool = Field(True, description="Allow /auth/register")
    access_token_ttl_s: int = Field(3600, ge=60, le=86_400)
    refresh_token_ttl_s: int = Field(30 * 86_400, ge=3600)

    rate_limit_per_user: int = Field(100, ge=0, description="Requests a minute; 0 disables")
    rate_limit_per_premium_user: int = Field(1000, ge=0)
    rate_limit_per_address: int = Field(100, ge=0, description="Anonymous requests an hour")
    login_failures_per_account: int = Field(5, ge=1, description="Before a 15 min lockout")
    login_failures_per_address: int = Field(20, ge=1)

    max_body_bytes: int = Field(1024 * 1024, ge=1024)
    sample_data: bool = Field(False, description="Create a sample farm hierarchy when empty")
    log_level: str = Field("INFO", pattern="^(DEBUG|INFO|WARNING|ERROR)$")

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
