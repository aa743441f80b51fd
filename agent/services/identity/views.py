"""Users as the API shows them: a user row without its password hash or MFA secret."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from protocol.identity import Role
from protocol.schemas.users import User

__all__ = ["user_model"]


def user_model(row: sqlite3.Row, farms: Sequence[str]) -> User:
    """The API view of a user row (no password hash, no MFA secret)."""
    return User(
        id=row["id"],
        email=row["email"],
        full_name=row["full_name"],
        role=Role(row["role"]),
        status=row["status"],
        plan=row["plan"],
        email_verified=bool(row["email_verified"]),
        mfa_enabled=bool(row["mfa_enabled"]),
        last_login=row["last_login"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        farms_access=list(farms),
    )
