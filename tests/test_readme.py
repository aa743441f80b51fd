"""The README's configuration table lists exactly the agent's settings, with their defaults."""

from __future__ import annotations

from pathlib import Path

from agent.settings import AgentSettings

README = Path(__file__).resolve().parents[1] / "README.md"

# Defaults that are not literal values.
SPECIAL = {
    "admin_password": "generated, printed once",
    "profiles_dir": "the set shipped in the package",
}


def settings_table() -> str:
    """The table as the README should carry it, generated from AgentSettings."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in AgentSettings.model_fields.items():
        default = field.default
        if name in SPECIAL:
            shown = SPECIAL[name]
        elif default is None:
            shown = "unset"
        elif isinstance(default, bool):
            shown = str(default).lower()
        else:
            shown = str(default)
        lines.append(f"| `FARM_{name.upper()}` | `{shown}` | {field.description} |")
    return "\n".join(lines)


def test_readme_lists_every_setting_with_its_default() -> None:
    table = settings_table()
    assert table in README.read_text(encoding="utf-8"), (
        "README.md's configuration table is out of date; replace it with:\n" + table
    )
