"""The README's configuration tables list exactly the agent's and the cloud's settings, with
their defaults."""

from __future__ import annotations

import re
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


def test_the_readme_pairs_the_state_the_demo_runs_on() -> None:
    """Pasted after ``scripts/demo``, the pairing command names the demo's state directory and
    the command ``scripts/demo`` installs (tests/e2e/test_readme_pairing.py runs the steps)."""
    demo = (README.parent / "scripts" / "demo").read_text(encoding="utf-8")
    found = re.search(r'FARM_STATE_DIR="\$\{FARM_STATE_DIR:-([^}]+)\}"', demo)
    assert found is not None, "scripts/demo no longer sets FARM_STATE_DIR's default"
    command = f".venv/bin/farm-agent pair --state-dir {found.group(1)} --cloud "
    assert command in README.read_text(encoding="utf-8")
