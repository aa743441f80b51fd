"""Who may see which farm: the one place the agent applies the visibility rule
(docs/design.md section 4).

A farm is visible to admins and to users holding a permission on it. Its creator holds one like
anyone else (read_write, granted at creation), so an admin may reduce or revoke it. Every
farm-scoped query in the store takes its filter from here.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent.store.db import Database
from protocol.identity import PermissionType, Principal, Role

__all__ = [
    "farm_grant",
    "grant_through",
    "visible_farm_filter",
    "visible_permission_filter",
    "writable_farm_filter",
    "writable_page",
]


def visible_farm_filter(principal: Principal, farm_id_column: str) -> tuple[str, list[Any]]:
    """An SQL condition on ``farm_id_column`` that keeps only farms the caller may see."""
    if principal.is_admin:
        return "1 = 1", []
    return (
        f"{farm_id_column} IN (SELECT farm_id FROM permissions WHERE user_id = ?)",
        [principal.user_id],
    )


def writable_farm_filter(principal: Principal, farm_id_column: str) -> tuple[str, list[Any]]:
    """An SQL condition on ``farm_id_column`` that keeps only farms the caller may write."""
    if principal.is_admin:
        return "1 = 1", []
    return (
        f"{farm_id_column} IN (SELECT farm_id FROM permissions"
        " WHERE user_id = ? AND permission_type = ?)",
        [principal.user_id, PermissionType.READ_WRITE.value],
    )


async def writable_page(
    db: Database,
    table: str,
    columns: str,
    principal: Principal,
    farm_id: str | None,
    limit: int,
    offset: int,
) -> tuple[list[sqlite3.Row], int]:
    """A page of a farm-scoped table's rows on farms the caller may write (``farm_id``: that
    farm's only), oldest first, and their total."""
    condition, params = writable_farm_filter(principal, "farm_id")
    if farm_id is not None:
        condition += " AND farm_id = ?"
        params.append(farm_id)
    return await db.fetch_page(
        table, condition, params, order="created_at, id", limit=limit, offset=offset,
        columns=columns,
    )  # fmt: skip


def visible_permission_filter(principal: Principal, alias: str) -> tuple[str, list[Any]]:
    """An SQL condition on permissions ``alias`` keeping those the caller may see: admins all,
    everyone their own, and farm managers those on farms they may write (they share them)."""
    if principal.is_admin:
        return "1 = 1", []
    own = f"{alias}.user_id = ?"
    if principal.role is not Role.FARM_MANAGER:
        return own, [principal.user_id]
    return (
        f"({own} OR {alias}.farm_id IN (SELECT farm_id FROM permissions"
        " WHERE user_id = ? AND permission_type = ?))",
        [principal.user_id, principal.user_id, PermissionType.READ_WRITE.value],
    )


async def farm_grant(db: Database, principal: Principal, farm_id: str) -> PermissionType | None:
    """The caller's grant on a farm, or ``None`` if it does not exist or is not visible."""
    return await grant_through(db, principal, "farms", "id", farm_id)


async def grant_through(
    db: Database, principal: Principal, table: str, farm_column: str, item_id: str
) -> PermissionType | None:
    """The caller's grant on the farm that the row ``item_id`` of ``table`` belongs to (named by
    its ``farm_column``), or ``None`` if there is no such row or the farm is not visible.

    One point read: a request that names an item below a farm finds the farm and the grant on
    it together (the item's farm exists, by its foreign key)."""
    row = await db.lookup(
        f"""
        SELECT p.permission_type AS granted
        FROM {table} t
        LEFT JOIN permissions p ON p.farm_id = t.{farm_column} AND p.user_id = ?
        WHERE t.id = ?
        """,
        (principal.user_id, item_id),
    )
    if row is None:
        return None
    if principal.is_admin:
        return PermissionType.READ_WRITE
    if row["granted"] is None:
        return None
    return PermissionType(row["granted"])
