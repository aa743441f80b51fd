"""farm-agent backup and restore: consistent under ingest, checked, never destructive."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.reading_ingester import STEP, T0

ROOT = Path(__file__).resolve().parents[3]


def farm_agent(*args: str, state_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run the farm-agent CLI as a person would."""
    return subprocess.run(
        [sys.executable, "-m", "agent", *args, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )


def reading_values(db: Path) -> set[int]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return {int(row[0]) for row in conn.execute("SELECT value FROM readings")}


def committed_line(process: subprocess.Popen[str], at_least: int) -> int:
    """Read the ingester's output until it reports ``at_least`` readings committed."""
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("committed ") and int(line.split()[1]) >= at_least:
            return int(line.split()[1])
    raise AssertionError("the ingester stopped")


def test_backup_under_ingest_restores_every_reading_committed_before_it(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "signing_key.pem").write_text("key")
    with subprocess.Popen(
        [sys.executable, "-m", "tests.support.reading_ingester", str(state / "agent.db")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    ) as ingester:
        try:
            before = committed_line(ingester, 2000)  # everything up to it is committed
            result = farm_agent("backup", str(tmp_path / "b.tar.gz"), state_dir=state)
            after = committed_line(ingester, before + 2000)  # it kept ingesting throughout
        finally:
            ingester.terminate()
    assert result.returncode == 0, result.stderr
    assert after > before

    restored = tmp_path / "restored"
    result = farm_agent("restore", str(tmp_path / "b.tar.gz"), state_dir=restored)
    assert result.returncode == 0, result.stderr
    values = reading_values(restored / "agent.db")
    assert set(range(before + 1)) <= values
    assert (restored / "signing_key.pem").read_text() == "key"
    with contextlib.closing(sqlite3.connect(restored / "agent.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        ts = conn.execute("SELECT max(ts) FROM readings").fetchone()[0]
    assert ts == T0 + max(values) * STEP


@pytest.fixture
def state_with_backup(tmp_path):
    state = tmp_path / "state"
    with subprocess.Popen(
        [sys.executable, "-m", "tests.support.reading_ingester", str(state / "agent.db")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    ) as ingester:
        try:
            committed_line(ingester, 100)
        finally:
            ingester.terminate()
    result = farm_agent("backup", str(tmp_path), state_dir=state)
    assert result.returncode == 0, result.stderr
    (archive,) = tmp_path.glob("farm-agent-*.tar.gz")
    return state, archive


def test_restore_refuses_while_the_agent_runs(state_with_backup):
    from agent.ops.state_lock import hold_state

    state, archive = state_with_backup
    before = (state / "agent.db").read_bytes()
    with hold_state(state):  # what a running agent holds
        result = farm_agent("restore", str(archive), state_dir=state)
    assert result.returncode != 0
    assert "running agent" in result.stderr and "systemctl stop farm-agent" in result.stderr
    assert (state / "agent.db").read_bytes() == before


def test_restore_keeps_the_current_database_aside(state_with_backup):
    state, archive = state_with_backup
    before = (state / "agent.db").read_bytes()
    result = farm_agent("restore", str(archive), state_dir=state)
    assert result.returncode == 0, result.stderr
    (aside,) = (state / "replaced").iterdir()
    assert (aside / "agent.db").read_bytes() == before


def test_a_corrupt_backup_is_refused_and_changes_nothing(state_with_backup, tmp_path):
    state, archive = state_with_backup
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(bytes(data))
    before = (state / "agent.db").read_bytes()
    result = farm_agent("restore", str(broken), state_dir=state)
    assert result.returncode != 0
    assert "Restore failed, nothing changed" in result.stderr
    assert (state / "agent.db").read_bytes() == before
    assert not (state / "replaced").exists()


def test_a_tampered_archive_fails_its_checksum(state_with_backup):
    state, archive = state_with_backup
    with archive.open("ab") as stream:
        stream.write(b"\0")
    result = farm_agent("restore", str(archive), state_dir=state)
    assert result.returncode != 0 and "checksum" in result.stderr


def test_backup_to_a_path_that_is_not_writable_is_a_clear_error(state_with_backup, tmp_path):
    state, _ = state_with_backup
    result = farm_agent("backup", str(tmp_path / "missing" / "b.tar.gz"), state_dir=state)
    assert result.returncode != 0
    assert "not a writable directory" in result.stderr
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if os.geteuid() != 0:  # root writes anywhere
        result = farm_agent("backup", str(locked / "b.tar.gz"), state_dir=state)
        assert result.returncode != 0 and "not a writable directory" in result.stderr


def test_automatic_backups_keep_the_newest(tmp_path):
    from datetime import UTC, datetime, timedelta

    from agent.ops.backup import create_backup, prune_backups

    db = tmp_path / "agent.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE TABLE t (a)")
    folder = tmp_path / "backups"
    folder.mkdir()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for day in range(5):
        create_backup(tmp_path, db, folder, version="t", now=start + timedelta(days=day))
    deleted = prune_backups(folder, keep=3)
    assert len(deleted) == 2
    kept = sorted(p.name for p in folder.glob("*.tar.gz"))
    assert kept == [f"farm-agent-2026010{d}T000000Z.tar.gz" for d in (3, 4, 5)]
    assert len(list(folder.glob("*.sha256"))) == 3
