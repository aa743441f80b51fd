"""The user, permission, API key and auth event endpoints, declared once for the agent and the
cloud (docs/design.md section 12): both serve the same paths, schemas and answers, each over
its own services, which an app-specific getter finds in the running app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from protocol.http.endpoints import Api, principal_of
from protocol.identity import Principal
from protocol.schemas.auth import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyList,
    ApiKeyListQuery,
    AuthEventList,
    AuthEventQuery,
)
from protocol.schemas.users import (
    Permission,
    PermissionCreate,
    PermissionList,
    PermissionQuery,
    ProfileUpdate,
    RoleChange,
    User,
    UserCreate,
    UserList,
    UserListQuery,
    UserUpdate,
)

__all__ = [
    "ApiKeyManagement",
    "AuthEventLog",
    "PermissionManagement",
    "UserManagement",
    "api_keys_api",
    "auth_events_api",
    "users_api",
]

_USERS = "Users"
_PERMISSIONS = "Permissions"
_API_KEYS = "API keys"


class UserManagement(Protocol):
    """What the user endpoints need of a user service."""

    async def profile(self, principal: Principal) -> User: ...
    async def update_profile(
        self, principal: Principal, body: ProfileUpdate, address: str | None
    ) -> User: ...
    async def change_role(self, principal: Principal, body: RoleChange) -> User: ...
    async def list(self, principal: Principal, query: UserListQuery) -> UserList: ...
    async def create(self, principal: Principal, body: UserCreate) -> User: ...
    async def get(self, principal: Principal, user_id: str) -> User: ...
    async def update(self, principal: Principal, user_id: str, body: UserUpdate) -> User: ...
    async def delete(self, principal: Principal, user_id: str) -> None: ...


class PermissionManagement(Protocol):
    """What the permission endpoints need of a permission service."""

    async def list(self, principal: Principal, query: PermissionQuery) -> PermissionList: ...
    async def create(self, principal: Principal, body: PermissionCreate) -> Permission: ...
    async def delete(self, principal: Principal, permission_id: str) -> None: ...


class ApiKeyManagement(Protocol):
    """What the API key endpoints need of an API key service."""

    async def create(
        self, principal: Principal, body: ApiKeyCreate, address: str | None
    ) -> ApiKeyCreated: ...
    async def list(self, principal: Principal, query: ApiKeyListQuery) -> ApiKeyList: ...
    async def revoke(self, principal: Principal, key_id: str, address: str | None) -> None: ...


class AuthEventLog(Protocol):
    """What the auth event endpoint needs of the event log."""

    async def list(self, principal: Principal, query: AuthEventQuery) -> AuthEventList: ...


def users_api(
    users: Callable[[web.Application], UserManagement],
    permissions: Callable[[web.Application], PermissionManagement],
) -> Api:
    """/api/v1/users, /api/v1/users/profile, /api/v1/users/permissions, /api/v1/permissions."""
    api = Api()

    @api.route(
        "GET",
        "/api/v1/users/profile",
        summary="The caller's own account",
        tag=_USERS,
        response=User,
    )
    async def get_profile(request: web.Request) -> User:
        """The caller's account, with the farms granted to it."""
        return await users(request.app).profile(principal_of(request))

    @api.route(
        "PUT",
        "/api/v1/users/profile",
        summary="Update the caller's name, email or password",
        tag=_USERS,
        body=ProfileUpdate,
        response=User,
        errors=(400, 409),
    )
    async def update_profile(request: web.Request, body: ProfileUpdate) -> User:
        """Email and password changes need ``current_password``; a new password ends other
        sessions."""
        return await users(request.app).update_profile(principal_of(request), body, request.remote)

    @api.route(
        "POST",
        "/api/v1/users/permissions",
        summary="Set a user's role and/or replace their farm grants (admins)",
        tag=_USERS,
        body=RoleChange,
        response=User,
        errors=(403, 404, 409),
    )
    async def change_role(request: web.Request, body: RoleChange) -> User:
        """The user with the new role and grants."""
        return await users(request.app).change_role(principal_of(request), body)

    @api.route(
        "GET",
        "/api/v1/users/",
        summary="List users (admins)",
        tag=_USERS,
        query=UserListQuery,
        response=UserList,
        errors=(403,),
    )
    async def list_users(request: web.Request, query: UserListQuery) -> UserList:
        """Users by email, filtered by role and status."""
        return await users(request.app).list(principal_of(request), query)

    @api.route(
        "POST",
        "/api/v1/users/",
        summary="Create a user (admins)",
        tag=_USERS,
        body=UserCreate,
        response=User,
        status=201,
        errors=(403, 409),
    )
    async def create_user(request: web.Request, body: UserCreate) -> User:
        """A user with a role; ``farms_access`` grants those farms."""
        return await users(request.app).create(principal_of(request), body)

    @api.route(
        "GET",
        "/api/v1/users/{user_id}",
        summary="One user (admins, or the user themselves)",
        tag=_USERS,
        response=User,
        errors=(403,),
    )
    async def get_user(request: web.Request, user_id: str) -> User:
        """The user, without any secret."""
        return await users(request.app).get(principal_of(request), user_id)

    @api.route(
        "PUT",
        "/api/v1/users/{user_id}",
        summary="Update a user's information and permissions (admins)",
        tag=_USERS,
        body=UserUpdate,
        response=User,
        errors=(400, 403, 409),
    )
    async def update_user(request: web.Request, user_id: str, body: UserUpdate) -> User:
        """Change the given fields; a new password or suspension ends the user's sessions."""
        return await users(request.app).update(principal_of(request), user_id, body)

    @api.route(
        "DELETE",
        "/api/v1/users/{user_id}",
        summary="Remove a user (admins)",
        tag=_USERS,
        status=204,
        errors=(400, 403, 409),
    )
    async def delete_user(request: web.Request, user_id: str) -> None:
        """Remove the user with their sessions, API keys and permissions."""
        await users(request.app).delete(principal_of(request), user_id)

    @api.route(
        "GET",
        "/api/v1/permissions/",
        summary="List permissions the caller may see",
        tag=_PERMISSIONS,
        query=PermissionQuery,
        response=PermissionList,
    )
    async def list_permissions(request: web.Request, query: PermissionQuery) -> PermissionList:
        """Admins see all; farm managers those on farms they write; everyone their own."""
        return await permissions(request.app).list(principal_of(request), query)

    @api.route(
        "POST",
        "/api/v1/permissions/",
        summary="Grant a user access to a farm",
        tag=_PERMISSIONS,
        body=PermissionCreate,
        response=Permission,
        status=201,
        errors=(403, 404, 409),
    )
    async def create_permission(request: web.Request, body: PermissionCreate) -> Permission:
        """Admins on any farm, farm managers on farms they may write."""
        return await permissions(request.app).create(principal_of(request), body)

    @api.route(
        "DELETE",
        "/api/v1/permissions/{permission_id}",
        summary="Revoke a permission",
        tag=_PERMISSIONS,
        status=204,
        errors=(403, 409),
    )
    async def delete_permission(request: web.Request, permission_id: str) -> None:
        """The user loses access to the farm at once."""
        await permissions(request.app).delete(principal_of(request), permission_id)

    return api


def api_keys_api(keys: Callable[[web.Application], ApiKeyManagement]) -> Api:
    """/api/v1/api-keys: admins create, list and revoke API keys (sent as ``X-API-Key``)."""
    api = Api()

    @api.route(
        "POST",
        "/api/v1/api-keys",
        summary="Create an API key for a user (admins); the key is shown once",
        tag=_API_KEYS,
        body=ApiKeyCreate,
        response=ApiKeyCreated,
        status=201,
        errors=(403, 404, 409),
    )
    async def create_api_key(request: web.Request, body: ApiKeyCreate) -> ApiKeyCreated:
        """A key acting with the user's role and permissions."""
        return await keys(request.app).create(principal_of(request), body, request.remote)

    @api.route(
        "GET",
        "/api/v1/api-keys",
        summary="List API keys (admins), without the keys themselves",
        tag=_API_KEYS,
        query=ApiKeyListQuery,
        response=ApiKeyList,
        errors=(403,),
    )
    async def list_api_keys(request: web.Request, query: ApiKeyListQuery) -> ApiKeyList:
        """Keys newest first; revoked ones with ``include_revoked=true``."""
        return await keys(request.app).list(principal_of(request), query)

    @api.route(
        "DELETE",
        "/api/v1/api-keys/{key_id}",
        summary="Revoke an API key (admins); refused from the next request",
        tag=_API_KEYS,
        status=204,
        errors=(403, 409),
    )
    async def revoke_api_key(request: web.Request, key_id: str) -> None:
        """Revoke the key at once."""
        await keys(request.app).revoke(principal_of(request), key_id, request.remote)

    return api


def auth_events_api(events: Callable[[web.Application], AuthEventLog], tag: str) -> Api:
    """/api/v1/auth-events, documented under ``tag``."""
    api = Api()

    @api.route(
        "GET",
        "/api/v1/auth-events",
        summary="Authentication events, newest first (admins)",
        tag=tag,
        query=AuthEventQuery,
        response=AuthEventList,
        errors=(403,),
    )
    async def list_auth_events(request: web.Request, query: AuthEventQuery) -> AuthEventList:
        """Logins, failures, logouts, refresh reuse, MFA, API keys and password resets."""
        return await events(request.app).list(principal_of(request), query)

    return api
