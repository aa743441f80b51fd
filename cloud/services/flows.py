"""The shared identity flows (protocol/identity_flows) as the cloud runs them: its user rows are
``asyncpg.Record`` and a request's origin is its address and user agent."""

from __future__ import annotations

from typing import TypeAlias

import asyncpg

from cloud.services.sessions import Client
from protocol.identity_flows.account_flows import AccountFlows
from protocol.identity_flows.api_keys import ApiKeyFlows
from protocol.identity_flows.mfa import MfaFlows

__all__ = ["CloudAccountFlows", "CloudApiKeys", "CloudMfa", "address_of"]

CloudAccountFlows: TypeAlias = AccountFlows[asyncpg.Record, Client]
CloudMfa: TypeAlias = MfaFlows[asyncpg.Record, Client]
CloudApiKeys: TypeAlias = ApiKeyFlows[asyncpg.Record]


def address_of(client: Client) -> str | None:
    """The address a request came from, for the authentication log."""
    return client.ip
