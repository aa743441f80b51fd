"""The README's configuration tables list exactly the agent's and the cloud's settings, with
their defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from agent.settings import AgentSettings
from cloud.settings import CloudSettings

README = Path(__file__).resolve().parents[1] / "README.md"

# Defaults that are not literal values.
SPECIAL = {
    (AgentSettings, "admin_password"): "generated, printed once",
    (AgentSettings, "profiles_dir"): "the set shipped in the package",
    (AgentSettings, "mqtt_client_id"): "farm-agent-<instance id>",
    (CloudSettings, "admin_password"): "generated, printed once",
}


def settings_table(settings: type[BaseSettings], prefix: str) -> str:
    """The table as the README should carry it, generated from a settings class."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in settings.model_fields.items():
        default = field.default
        if (settings, name) in SPECIAL:
            shown = SPECIAL[(settings, name)]
        elif default is PydanticUndefined:
            shown = "required"
        elif default is None:
            shown = "unset"
        elif isinstance(default, bool):
            shown = str(default).lower()
        else:
            shown = str(default)
        lines.append(f"| `{prefix}{name.upper()}` | `{shown}` | {field.description} |")
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("settings", "prefix"), [(AgentSettings, "FARM_"), (CloudSettings, "CLOUD_")]
)
def test_readme_lists_every_setting_with_its_default(
    settings: type[BaseSettings], prefix: str
) -> None:
    table = settings_table(settings, prefix)
    assert table in README.read_text(encoding="utf-8"), (
        f"README.md's {prefix}* configuration table is out of date; replace it with:\n" + table
    )
