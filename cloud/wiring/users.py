"""User management on the cloud: users, permissions and the auth event log."""

from __future__ import annotations

from aiohttp import web

from cloud.services.auth_events import AuthEvents
from cloud.services.permissions import PermissionService
from cloud.services.users import UserService
from cloud.store.db import Database
from cloud.web.keys import AUTH_EVENTS, AUTH_FLOWS, PERMISSIONS, USERS

__all__ = ["user_services"]


def user_services(app: web.Application, db: Database) -> None:
    """Build the user management services into ``app`` (after the identity services: a changed
    address is verified through their account flows)."""
    events = AuthEvents(db)
    app[AUTH_EVENTS] = events
    app[USERS] = UserService(db, events, app[AUTH_FLOWS])
    app[PERMISSIONS] = PermissionService(db)
