"""Backups of the agent's state: an online SQLite backup and the keys, in one .tar.gz.

The archive holds ``manifest.json`` (what, when, the schema version, each file's SHA-256 and
size), ``agent.db`` (a consistent copy taken while the agent runs: SQLite's backup API reads
one snapshot while writers go on under WAL) and the state directory's key and link files. A
``<archive>.sha256`` beside it checks the archive itself (``sha256sum -c``).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sqlite3
import tarfile
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "BackupError",
    "BackupResult",
    "archive_name",
    "create_backup",
    "prune_backups",
    "restore_backup",
]

DATABASE = "agent.db"
_MANIFEST = "manifest.json"
_FORMAT = 1
_STATE_FILES = ("signing_key.pem", "sync_key.pem", "cloud_link.json")
_PREFIX = "farm-agent-"
_SUFFIX = ".tar.gz"


class BackupError(Exception):
    """A backup could not be written or a backup is not fit to restore (the message says why)."""


@dataclass(frozen=True)
class BackupResult:
    """Where the archive went and what it holds."""

    path: Path
    manifest: dict[str, object]


def archive_name(moment: datetime) -> str:
    """The file name of a backup taken at ``moment``."""
    return f"{_PREFIX}{moment.strftime('%Y%m%dT%H%M%SZ')}{_SUFFIX}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _integrity(path: Path) -> list[str]:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            found = [str(row[0]) for row in conn.execute("PRAGMA integrity_check(20)")]
    except sqlite3.DatabaseError as err:
        return [str(err)]
    return [] if found == ["ok"] else found


def create_backup(
    state_dir: Path, database: Path, target: Path, *, version: str, now: datetime | None = None
) -> BackupResult:
    """Write a backup of ``state_dir`` to ``target`` (a file, or a directory to put one in)."""
    moment = now or datetime.now(UTC)
    if target.is_dir():
        target = target / archive_name(moment)
    if target.exists():
        raise BackupError(f"{target} exists; choose a new file name")
    if not database.exists():
        raise BackupError(f"no database at {database}")
    folder = target.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise BackupError(f"cannot write to {folder}: not a writable directory")
    with tempfile.TemporaryDirectory(dir=folder, prefix=".farm-backup-") as scratch:
        copy = Path(scratch) / DATABASE
        _online_copy(database, copy)
        problems = _integrity(copy)
        if problems:
            raise BackupError(f"the database copy fails its integrity check: {problems[:3]}")
        members = {DATABASE: copy}
        members.update(
            (name, state_dir / name) for name in _STATE_FILES if (state_dir / name).is_file()
        )
        with contextlib.closing(sqlite3.connect(copy)) as conn:
            (schema,) = conn.execute("PRAGMA user_version").fetchone()
        manifest: dict[str, object] = {
            "format": _FORMAT,
            "created": moment.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "agent_version": version,
            "schema_version": int(schema),
            "files": {
                name: {"sha256": _sha256(path), "bytes": path.stat().st_size}
                for name, path in members.items()
            },
        }
        partial = Path(scratch) / target.name
        with tarfile.open(partial, "w:gz", compresslevel=6) as archive:
            data = json.dumps(manifest, indent=2).encode()
            entry = tarfile.TarInfo(_MANIFEST)
            entry.size, entry.mtime, entry.mode = len(data), int(moment.timestamp()), 0o600
            archive.addfile(entry, io.BytesIO(data))
            for name, path in members.items():
                archive.add(path, arcname=name, recursive=False)
        os.chmod(partial, 0o600)  # it holds the agent's private keys
        os.replace(partial, target)
    target.with_name(target.name + ".sha256").write_text(f"{_sha256(target)}  {target.name}\n")
    return BackupResult(target, manifest)


def _online_copy(database: Path, copy: Path) -> None:
    source = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    try:
        with contextlib.closing(sqlite3.connect(copy)) as dest:
            source.backup(dest)  # all pages in one step: one consistent snapshot
    finally:
        source.close()


def prune_backups(folder: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` automatic backups in ``folder``; return the deleted."""
    found = sorted(p for p in folder.glob(f"{_PREFIX}*{_SUFFIX}") if p.is_file())
    doomed = found[: max(0, len(found) - keep)]
    for path in doomed:
        path.unlink()
        path.with_name(path.name + ".sha256").unlink(missing_ok=True)
    return doomed


def restore_backup(archive: Path, state_dir: Path, database: Path) -> Path:
    """Check ``archive`` and put its state in place; the current state is moved aside (its
    folder is returned). The caller holds the state directory's lock."""
    _check_archive_checksum(archive)
    with tempfile.TemporaryDirectory(dir=state_dir, prefix=".farm-restore-") as scratch:
        files = _extract_checked(archive, Path(scratch))
        problems = _integrity(files[DATABASE])
        if problems:
            raise BackupError(f"{archive}: the database fails its integrity check: {problems[:3]}")
        aside = state_dir / "replaced" / datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        aside.mkdir(parents=True)
        for name in (DATABASE, f"{DATABASE}-wal", f"{DATABASE}-shm", *_STATE_FILES):
            current = database if name == DATABASE else state_dir / name
            if name.startswith(f"{DATABASE}-"):
                current = database.with_name(name)
            if current.exists():
                current.rename(aside / name)
        for name, path in files.items():
            os.replace(path, database if name == DATABASE else state_dir / name)
    return aside


def _check_archive_checksum(archive: Path) -> None:
    if not archive.is_file():
        raise BackupError(f"{archive}: no such backup file")
    sidecar = archive.with_name(archive.name + ".sha256")
    if sidecar.is_file():
        expected = sidecar.read_text().split()[0] if sidecar.read_text().split() else ""
        if expected != _sha256(archive):
            raise BackupError(f"{archive}: checksum does not match {sidecar.name}")


def _extract_checked(archive: Path, into: Path) -> dict[str, Path]:
    """Extract the manifest's files, checking each one's size and SHA-256."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.extractfile(_MANIFEST)
            if member is None:
                raise BackupError(f"{archive}: no manifest")
            manifest = json.loads(member.read())
            listed = manifest.get("files", {})
            if manifest.get("format") != _FORMAT or DATABASE not in listed:
                raise BackupError(f"{archive}: not a farm-agent backup (format)")
            files: dict[str, Path] = {}
            for name, facts in listed.items():
                if name != DATABASE and name not in _STATE_FILES:
                    raise BackupError(f"{archive}: unexpected file {name!r}")
                data = tar.extractfile(name)
                if data is None:
                    raise BackupError(f"{archive}: {name} is missing")
                path = into / name
                with path.open("wb") as out:
                    while block := data.read(1 << 20):
                        out.write(block)
                if _sha256(path) != facts.get("sha256"):
                    raise BackupError(f"{archive}: {name} does not match its checksum")
                files[name] = path
    except (tarfile.TarError, OSError, EOFError, ValueError, KeyError) as err:
        raise BackupError(f"{archive}: not a readable backup ({err})") from err
    return files
