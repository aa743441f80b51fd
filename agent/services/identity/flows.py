"""The shared identity flows (protocol/identity_flows) as the agent runs them: its user rows are
``sqlite3.Row`` and a request's origin is its address."""

from __future__ import annotations

import sqlite3
from typing import TypeAlias

from protocol.identity_flows.account_flows import AccountFlows
from protocol.identity_flows.api_keys import ApiKeyFlows
from protocol.identity_flows.login import LoginFlow
from protocol.identity_flows.mfa import MfaFlows
from protocol.identity_flows.sessions import SessionFlows

__all__ = [
    "AgentAccountFlows",
    "AgentApiKeys",
    "AgentLogin",
    "AgentMfa",
    "AgentSessions",
    "address_of",
]

AgentAccountFlows: TypeAlias = AccountFlows[sqlite3.Row, str | None]
AgentMfa: TypeAlias = MfaFlows[sqlite3.Row, str | None]
AgentApiKeys: TypeAlias = ApiKeyFlows[sqlite3.Row]
AgentSessions: TypeAlias = SessionFlows[sqlite3.Row, str | None]
AgentLogin: TypeAlias = LoginFlow[sqlite3.Row, str | None]


def address_of(origin: str | None) -> str | None:
    """The agent describes a request's origin by its address alone."""
    return origin
