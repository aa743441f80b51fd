"""The migration runner: ordered, recorded, idempotent, safe when instances start together."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from cloud.store.migrations import MIGRATIONS_DIR, MigrationError, load_migrations, migrate
from tests.cloud.conftest import OWNER_PASSWORD, OWNER_ROLE
from tests.support.postgres import PostgresCluster


async def recorded_versions(dsn: str) -> list[int]:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        rows = await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
        return [r["version"] for r in rows]
    finally:
        await conn.close(timeout=10)


async def table_exists(dsn: str, name: str) -> bool:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return bool(await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"public.{name}"))
    finally:
        await conn.close(timeout=10)


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(exist_ok=True)
    for name, sql in files.items():
        (directory / name).write_text(sql)
    return directory


async def test_bundled_migrations_apply_in_order_and_are_recorded(empty_db: str) -> None:
    bundled = [m.version for m in load_migrations()]
    assert bundled == sorted(set(bundled))
    assert await migrate(empty_db) == bundled
    assert await recorded_versions(empty_db) == bundled
    assert await table_exists(empty_db, "readings")


async def test_a_second_run_applies_nothing(empty_db: str) -> None:
    await migrate(empty_db)
    assert await migrate(empty_db) == []
    assert await recorded_versions(empty_db) == [m.version for m in load_migrations()]


async def test_instances_starting_together_apply_each_migration_once(empty_db: str) -> None:
    bundled = [m.version for m in load_migrations()]
    results = await asyncio.gather(migrate(empty_db), migrate(empty_db), migrate(empty_db))
    assert sorted(results, key=len) == [[], [], bundled]
    assert await recorded_versions(empty_db) == bundled


async def test_a_failing_migration_leaves_no_trace_and_stops_the_run(
    empty_db: str, tmp_path: Path
) -> None:
    directory = write(
        tmp_path / "m",
        {
            "0001_first.sql": "CREATE TABLE first (id int);",
            "0002_broken.sql": "CREATE TABLE second (id int); SELECT 1 / 0;",
            "0003_third.sql": "CREATE TABLE third (id int);",
        },
    )
    with pytest.raises(asyncpg.DivisionByZeroError):
        await migrate(empty_db, directory=directory)
    assert await recorded_versions(empty_db) == [1]
    assert await table_exists(empty_db, "first")
    assert not await table_exists(empty_db, "second")
    assert not await table_exists(empty_db, "third")

    write(directory, {"0002_broken.sql": "CREATE TABLE second (id int);"})
    assert await migrate(empty_db, directory=directory) == [2, 3]


async def test_a_migration_changed_after_it_was_applied_is_refused(
    empty_db: str, tmp_path: Path
) -> None:
    directory = write(tmp_path / "m", {"0001_first.sql": "CREATE TABLE first (id int);"})
    await migrate(empty_db, directory=directory)
    write(directory, {"0001_first.sql": "CREATE TABLE first (id bigint);"})
    with pytest.raises(MigrationError, match="changed after it was applied"):
        await migrate(empty_db, directory=directory)


async def test_a_cloud_migrated_before_the_comments_were_reworded_starts(empty_db: str) -> None:
    # A cloud that applied 0003 before its comments were reworded holds the earlier text's
    # checksum: accepted once, then recorded as the current one; any other text is still refused.
    await migrate(empty_db)
    current = next(m for m in load_migrations() if m.version == 3).checksum
    conn = await asyncpg.connect(empty_db, timeout=10)
    try:
        earlier = "6437e8c15611d092c1dd314d87755314327dfd6d48dc3df2761a27639594d18a"
        await conn.execute("UPDATE schema_migrations SET checksum = $1 WHERE version = 3", earlier)
        assert await migrate(empty_db) == []
        assert await conn.fetchval("SELECT checksum FROM schema_migrations WHERE version = 3") == (
            current
        )
        await conn.execute("UPDATE schema_migrations SET checksum = 'other' WHERE version = 3")
        with pytest.raises(MigrationError, match="changed after it was applied"):
            await migrate(empty_db)
    finally:
        await conn.close(timeout=10)


async def test_a_database_from_a_newer_release_is_refused(empty_db: str, tmp_path: Path) -> None:
    newer = write(
        tmp_path / "newer",
        {"0001_first.sql": "CREATE TABLE first (id int);", "0002_more.sql": "SELECT 1;"},
    )
    await migrate(empty_db, directory=newer)
    older = write(tmp_path / "older", {"0001_first.sql": "CREATE TABLE first (id int);"})
    with pytest.raises(MigrationError, match="newer release"):
        await migrate(empty_db, directory=older)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"0001_a.sql": "", "0003_c.sql": "", "0003_d.sql": ""}, "two migrations numbered 0003"),
        ({"0001_a.sql": "", "2_b.sql": ""}, "NNNN_description.sql"),
        ({}, "no migration files"),
    ],
)
def test_migration_files_must_be_named_and_numbered_once(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    with pytest.raises(MigrationError, match=message):
        load_migrations(write(tmp_path / "m", files))


async def test_a_gap_filled_by_a_later_release_is_applied_then(
    empty_db: str, tmp_path: Path
) -> None:
    first = {"0001_a.sql": "CREATE TABLE a (id int);", "0020_c.sql": "CREATE TABLE c (id int);"}
    assert await migrate(empty_db, directory=write(tmp_path / "one", first)) == [1, 20]
    later = {**first, "0012_b.sql": "CREATE TABLE b (id int);"}
    assert await migrate(empty_db, directory=write(tmp_path / "two", later)) == [12]
    assert await table_exists(empty_db, "b")


async def test_existing_farm_creators_get_their_grant_when_it_becomes_one(
    postgres_cluster: PostgresCluster, cloud_template: str, empty_db: str, tmp_path: Path
) -> None:
    """Migration 0075, run by the schema owner (not a superuser: row-level security applies to
    it): the creator's implicit access becomes a permission row for every farm there is (an
    admin creator needs none; a farm without a creator gets none; a grant the creator holds
    already stays as it is)."""
    name = empty_db.rsplit("/", 1)[-1].split("?", 1)[0]
    superuser = await asyncpg.connect(empty_db, timeout=10)
    try:
        await superuser.execute(f'ALTER DATABASE "{name}" OWNER TO {OWNER_ROLE}')
    finally:
        await superuser.close(timeout=10)
    owner_dsn = postgres_cluster.dsn(name, OWNER_ROLE, OWNER_PASSWORD)
    before = tmp_path / "before"
    before.mkdir()
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        if int(path.name[:4]) < 75:
            (before / path.name).write_text(path.read_text())
    await migrate(owner_dsn, directory=before)
    conn = await asyncpg.connect(empty_db, timeout=10)  # the superuser seeds past RLS
    try:
        users = {
            role: await conn.fetchval(
                "INSERT INTO users (email, role) VALUES ($1, $2) RETURNING id",
                f"{role}@x.test",
                role,
            )
            for role in ("farm_manager", "operator", "admin")
        }
        farms = {
            name: await conn.fetchval(
                "INSERT INTO farms (user_id, name) VALUES ($1, $2) RETURNING id", creator, name
            )
            for name, creator in (
                ("managed", users["farm_manager"]),
                ("operated", users["operator"]),
                ("admin's", users["admin"]),
                ("orphan", None),
                ("shared", users["farm_manager"]),
            )
        }
        # A creator already granted their farm keeps that grant as it is.
        await conn.execute(
            "INSERT INTO permissions (user_id, farm_id, permission_type)"
            " VALUES ($1, $2, 'read_only')",
            users["farm_manager"],
            farms["shared"],
        )
        assert 75 in await migrate(owner_dsn)
        rows = await conn.fetch(
            "SELECT user_id, farm_id, permission_type, granted_by FROM permissions"
        )
        # The owner's temporary read policies are gone again.
        policies = await conn.fetch(
            "SELECT policyname FROM pg_policies WHERE policyname = 'migrate_creators'"
        )
    finally:
        await conn.close(timeout=10)
    expected = {
        (users["farm_manager"], farms["managed"], "read_write", users["farm_manager"]),
        (users["operator"], farms["operated"], "read_write", users["operator"]),
        (users["farm_manager"], farms["shared"], "read_only", None),
    }
    assert {tuple(r) for r in rows} == expected
    assert policies == []
