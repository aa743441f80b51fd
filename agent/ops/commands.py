"""``farm-agent backup`` and ``restore``: each returns the line to print, or raises
:class:`CommandFailed` with the line that says what to fix (the CLI exits non-zero)."""

from __future__ import annotations

from pathlib import Path

from agent.ops.backup import BackupError, create_backup, restore_backup
from agent.ops.state_lock import StateInUse, hold_state
from agent.settings import AgentSettings

__all__ = ["CommandFailed", "backup", "restore"]


class CommandFailed(Exception):
    """The command did nothing; the message says why."""


def backup(settings: AgentSettings, target: Path, version: str) -> str:
    """Back up the state directory to ``target`` (consistent while the agent runs)."""
    try:
        result = create_backup(settings.state_dir, settings.database_path, target, version=version)
    except (BackupError, OSError) as err:
        raise CommandFailed(f"Backup failed: {err}") from err
    return f"Backup written to {result.path} (checksum in {result.path.name}.sha256)"


def restore(settings: AgentSettings, archive: Path) -> str:
    """Restore ``archive`` into the state directory; refuses while the agent runs."""
    try:
        with hold_state(settings.state_dir):
            aside = restore_backup(archive, settings.state_dir, settings.database_path)
    except StateInUse as err:
        raise CommandFailed(f"Restore refused: {err}") from err
    except (BackupError, OSError) as err:
        raise CommandFailed(f"Restore failed, nothing changed: {err}") from err
    return f"Restored {archive}; the previous state is kept in {aside}"
