"""Identity: login, sessions, MFA, API keys, users, permissions and their event log."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from agent.services.identity.auth_events import AuthEvents
from agent.services.identity.authority import IdentityAuthority
from agent.services.identity.flows import address_of
from agent.services.identity.login_throttle import LoginThrottle, ThrottlePolicy
from agent.services.identity.permissions import PermissionService
from agent.services.identity.sessions import IdentityService
from agent.services.identity.users import UserService
from agent.settings import AgentSettings
from agent.store.api_keys import ApiKeyStore
from agent.store.auth_events import AuthEventStore
from agent.store.db import Database
from agent.store.identity_flows import AgentIdentityStore
from agent.store.one_time_tokens import OneTimeTokenStore
from agent.store.permissions import PermissionStore
from agent.store.sessions import SessionStore
from agent.store.users import UserStore
from agent.sync.link import link_path
from agent.web.keys import (
    API_KEYS,
    AUTH_EVENTS,
    AUTH_FLOWS,
    IDENTITY,
    LOGIN,
    MFA,
    PERMISSIONS,
    SESSIONS,
    USERS,
)
from agent.wiring.mail import mail_sender
from farmkit.mail import FlowPolicy, LogMailSender, MailSender
from protocol.identity_flows.account_flows import AccountFlows
from protocol.identity_flows.api_keys import ApiKeyFlows
from protocol.identity_flows.login import LoginFlow
from protocol.identity_flows.mfa import MfaFlows
from protocol.identity_flows.sessions import SessionFlows
from protocol.tokens import TokenSigner, TokenVerifier

__all__ = ["identity_services"]


def identity_services(
    app: web.Application,
    db: Database,
    settings: AgentSettings,
    signer: TokenSigner,
    verifier: TokenVerifier,
    mail: MailSender | None,
    clock: Callable[[], float],
) -> IdentityService:
    """Build the identity services into ``app`` and return the one that authenticates."""
    users, sessions, tokens = UserStore(db), SessionStore(db), OneTimeTokenStore(db)
    api_key_store, permission_store = ApiKeyStore(db), PermissionStore(db)
    event_store = AuthEventStore(db)
    events = AuthEvents(event_store)
    throttle = LoginThrottle(
        event_store,
        events,
        ThrottlePolicy(
            per_account=settings.login_failures_per_account,
            per_address=settings.login_failures_per_address,
            window_s=settings.login_failure_window_s,
        ),
    )
    authority = IdentityAuthority(lambda: link_path(settings.state_dir).exists())
    store = AgentIdentityStore(users, tokens, sessions, api_key_store)
    session_flows = SessionFlows(store, signer, settings.refresh_token_ttl_s, events, address_of)
    mfa_service = MfaFlows(
        store,
        session_flows,
        throttle,
        events,
        authority,
        address_of,
        issuer_name=settings.farm_name,
        challenge_ttl_s=settings.mfa_challenge_ttl_s,
        clock=clock,
    )
    sender = mail or mail_sender(settings)
    flows = AccountFlows(
        store,
        sender,
        events,
        FlowPolicy(
            registration_enabled=settings.registration_enabled,
            verify_token_ttl_s=settings.verify_token_ttl_s,
            reset_token_ttl_s=settings.reset_token_ttl_s,
            site_name=settings.farm_name,
        ),
        authority,
        address_of,
    )
    identity = IdentityService(users, sessions, api_key_store, verifier)
    app[IDENTITY] = identity
    app[AUTH_EVENTS] = events
    app[AUTH_FLOWS] = flows
    app[MFA] = mfa_service
    app[SESSIONS] = session_flows
    app[LOGIN] = LoginFlow(
        store,
        session_flows,
        mfa_service,
        throttle,
        events,
        address_of,
        # Unverified accounts sign in only where nobody could verify them (no mail).
        require_verified=not isinstance(sender, LogMailSender),
    )
    app[API_KEYS] = ApiKeyFlows(store, events, authority)
    app[USERS] = UserService(users, permission_store, sessions, flows, events, authority)
    app[PERMISSIONS] = PermissionService(db, permission_store, users, authority)
    return identity
