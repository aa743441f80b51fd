"""Users, profiles and per-farm permissions (docs/design.md section 12).

Passwords go in, never out: no response model here has a password field.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from protocol.identity import PermissionType, Plan, Role
from protocol.schemas.auth import Email, Page, Password, UuidIn
from protocol.schemas.common import ApiModel, Schema, Timestamp, Uuid

__all__ = [
    "FarmGrant",
    "Permission",
    "PermissionCreate",
    "PermissionList",
    "PermissionQuery",
    "ProfileUpdate",
    "RoleChange",
    "User",
    "UserCreate",
    "UserList",
    "UserListQuery",
    "UserStatus",
    "UserUpdate",
]

UserStatus = Literal["active", "suspended"]
"""``active``, or ``suspended``, which refuses logins, tokens and API keys at once."""

FarmIds = list[UuidIn]


class User(Schema):
    """A user as the API shows it; ``farms_access`` lists farms granted by a permission."""

    id: Uuid
    email: str
    full_name: str
    role: Role
    status: str
    plan: Plan
    email_verified: bool
    mfa_enabled: bool
    last_login: Timestamp | None
    created_at: Timestamp
    updated_at: Timestamp
    farms_access: FarmIds


class UserListQuery(Page):
    """GET /api/v1/users/ filters."""

    role: Role | None = None
    status: UserStatus | None = None


class UserList(Schema):
    """A page of users."""

    users: list[User]
    total: int
    limit: int
    offset: int


class UserCreate(ApiModel):
    """POST /api/v1/users/ (admin): ``farms_access`` grants each listed farm (see decisions)."""

    email: Email
    password: Password
    role: Role = Role.USER
    full_name: str = Field("", max_length=200)
    plan: Plan = Plan.STANDARD
    status: UserStatus = "active"
    farms_access: FarmIds = Field(default_factory=list, max_length=500)


class UserUpdate(ApiModel):
    """PUT /api/v1/users/{id} (admin): the fields given change; ``farms_access`` replaces grants."""

    email: Email | None = None
    password: Password | None = None
    role: Role | None = None
    full_name: str | None = Field(None, max_length=200)
    plan: Plan | None = None
    status: UserStatus | None = None
    mfa_enabled: Literal[False] | None = Field(
        None, description="false turns MFA off for a user who lost their authenticator"
    )
    farms_access: FarmIds | None = Field(None, max_length=500)

    @model_validator(mode="after")
    def _something(self) -> UserUpdate:
        if not self.model_fields_set:
            raise ValueError("give at least one field to change")
        for name in self.model_fields_set:
            if getattr(self, name) is None:
                raise ValueError(f"{name} may not be null")
        return self


class ProfileUpdate(ApiModel):
    """PUT /api/v1/users/profile: email and password changes need ``current_password``."""

    full_name: str | None = Field(None, max_length=200)
    email: Email | None = None
    password: Password | None = None
    current_password: str | None = Field(None, min_length=1, max_length=256)

    @model_validator(mode="after")
    def _checked(self) -> ProfileUpdate:
        changes = self.model_fields_set - {"current_password"}
        if not changes:
            raise ValueError("give at least one field to change")
        for name in changes:
            if getattr(self, name) is None:
                raise ValueError(f"{name} may not be null")
        if changes & {"email", "password"} and self.current_password is None:
            raise ValueError("changing email or password needs current_password")
        return self


class FarmGrant(ApiModel):
    """One farm and the kind of access to it."""

    farm_id: UuidIn
    permission_type: PermissionType


class RoleChange(ApiModel):
    """POST /api/v1/users/permissions (admin): set a user's role and/or replace their grants."""

    user_id: UuidIn
    role: Role | None = None
    permissions: list[FarmGrant] | None = Field(None, max_length=500)

    @model_validator(mode="after")
    def _something(self) -> RoleChange:
        if self.role is None and self.permissions is None:
            raise ValueError("give role, permissions or both")
        return self


class Permission(Schema):
    """A per-farm grant: which farm a user may read, or read and write."""

    id: Uuid
    user_id: Uuid
    farm_id: Uuid
    permission_type: PermissionType
    resource_type: Literal["farm"]
    granted_at: Timestamp
    granted_by: Uuid | None


class PermissionQuery(Page):
    """GET /api/v1/permissions/ filters."""

    user_id: UuidIn | None = None
    farm_id: UuidIn | None = None
    permission_type: PermissionType | None = None


class PermissionList(Schema):
    """A page of permissions the caller may see."""

    permissions: list[Permission]
    total: int
    limit: int
    offset: int


class PermissionCreate(ApiModel):
    """POST /api/v1/permissions/: grant a user access to a farm."""

    user_id: UuidIn
    farm_id: UuidIn
    permission_type: PermissionType
    resource_type: Literal["farm"] = "farm"
