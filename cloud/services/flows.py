"""The shared identity flows (protocol/identity_flows) as the cloud runs them: its user rows are
``asyncpg.Record`` and a request's origin is its address and user agent."""

from __future__ import annotations

from typing import TypeAlias

import asyncpg

from cloud.store.origin import Client
from protocol.identity_flows.account_flows import AccountFlows
from protocol.identity_flows.api_keys import ApiKeyFlows
from protocol.identity_flows.login import LoginFlow
from protocol.identity_flows.mfa import MfaFlows
from protocol.identity_flows.sessions import SessionFlows

__all__ = [
    "CloudAccountFlows",
    "CloudApiKeys",
    "CloudLogin",
    "CloudMfa",
    "CloudSessions",
    "address_of",
]

CloudAccountFlows: TypeAlias = AccountFlows[asyncpg.Record, Client]
CloudMfa: TypeAlias = MfaFlows[asyncpg.Record, Client]
CloudApiKeys: TypeAlias = ApiKeyFlows[asyncpg.Record]
CloudSessions: TypeAlias = SessionFlows[asyncpg.Record, Client]
CloudLogin: TypeAlias = LoginFlow[asyncpg.Record, Client]


def address_of(client: Client) -> str | None:
    """The address a request came from, for the authentication log."""
    return client.ip
