"""/api/v1/users, /api/v1/users/profile, /api/v1/users/permissions and /api/v1/permissions:
thin handlers over the user and permission services."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import PERMISSIONS, USERS
from protocol.http.endpoints import Api, principal_of
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

api = Api()
_USERS = "Users"
_PERMISSIONS = "Permissions"

# The profile routes come first: "/users/profile" must not be taken for "/users/{user_id}".


@api.route(
    "GET", "/api/v1/users/profile", summary="The caller's own account", tag=_USERS, response=User
)
async def get_profile(request: web.Request) -> User:
    """The caller's account, with the farms granted to it."""
    return await request.app[USERS].profile(principal_of(request))


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
    return await request.app[USERS].update_profile(principal_of(request), body, request.remote)


@api.route(
    "POST",
    "/api/v1/users/permissions",
    summary="Set a user's role and/or replace their farm grants (admins)",
    tag=_USERS,
    body=RoleChange,
    response=User,
    errors=(403, 404),
)
async def change_role(request: web.Request, body: RoleChange) -> User:
    """The user with the new role and grants."""
    return await request.app[USERS].change_role(principal_of(request), body)


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
    return await request.app[USERS].list(principal_of(request), query)


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
    return await request.app[USERS].create(principal_of(request), body)


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
    return await request.app[USERS].get(principal_of(request), user_id)


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
    return await request.app[USERS].update(principal_of(request), user_id, body)


@api.route(
    "DELETE",
    "/api/v1/users/{user_id}",
    summary="Remove a user (admins)",
    tag=_USERS,
    status=204,
    errors=(400, 403),
)
async def delete_user(request: web.Request, user_id: str) -> None:
    """Remove the user with their sessions, API keys and permissions."""
    await request.app[USERS].delete(principal_of(request), user_id)


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
    return await request.app[PERMISSIONS].list(principal_of(request), query)


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
    return await request.app[PERMISSIONS].create(principal_of(request), body)


@api.route(
    "DELETE",
    "/api/v1/permissions/{permission_id}",
    summary="Revoke a permission",
    tag=_PERMISSIONS,
    status=204,
    errors=(403,),
)
async def delete_permission(request: web.Request, permission_id: str) -> None:
    """The user loses access to the farm at once."""
    await request.app[PERMISSIONS].delete(principal_of(request), permission_id)
