"""Identity on the cloud: login, sessions, account flows, MFA, API keys, login throttling."""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cloud.services.api_keys import ApiKeyAuthenticator
from cloud.services.auth_events import AuthEvents
from cloud.services.flows import address_of
from cloud.services.identity import IdentityService
from cloud.services.login_throttle import LoginThrottle
from cloud.settings import CloudSettings
from cloud.store.db import Database
from cloud.store.identity_flows import CloudIdentityStore
from cloud.web.keys import API_KEY_AUTH, API_KEYS, AUTH_FLOWS, LOGIN, MFA, SESSIONS
from cloud.wiring.mail import smtp_settings
from farmkit.mail import FlowPolicy, LogMailSender, MailSender
from farmkit.secretbox import SecretBox, derived_key, key_from_text, load_or_create_key
from farmkit.smtp import mail_sender
from protocol.identity_flows.account_flows import AccountFlows
from protocol.identity_flows.api_keys import ApiKeyFlows
from protocol.identity_flows.login import LoginFlow
from protocol.identity_flows.mfa import MfaFlows
from protocol.identity_flows.ports import SelfGoverned
from protocol.identity_flows.sessions import SessionFlows
from protocol.login_throttle import ThrottlePolicy
from protocol.tokens import TokenSigner, TokenVerifier

__all__ = ["identity_services", "secret_key"]

log = logging.getLogger(__name__)

_DERIVED_PURPOSE = "farm-cloud secrets at rest v1"


def secret_key(settings: CloudSettings, signing_key: Ed25519PrivateKey) -> bytes:
    """CLOUD_SECRET_KEY, else the file at CLOUD_SECRET_KEY_PATH (created if missing), else a key
    derived from the signing key (rotating that key then makes stored MFA seeds unreadable)."""
    if settings.secret_key is not None:
        return key_from_text(settings.secret_key.get_secret_value(), "CLOUD_SECRET_KEY")
    if settings.secret_key_path is not None:
        return load_or_create_key(settings.secret_key_path)
    log.info("no CLOUD_SECRET_KEY: secrets at rest use a key derived from the signing key")
    return derived_key(signing_key, _DERIVED_PURPOSE)


def identity_services(
    app: web.Application,
    db: Database,
    settings: CloudSettings,
    signing_key: Ed25519PrivateKey,
    signer: TokenSigner,
    verifier: TokenVerifier,
    clock: Callable[[], float],
    mail: MailSender | None = None,
) -> IdentityService:
    """Build the identity services into ``app`` and return the one that authenticates."""
    events = AuthEvents(db)
    throttle = LoginThrottle(
        db,
        events,
        ThrottlePolicy(
            per_account=settings.login_throttle_per_account,
            per_address=settings.login_failures_per_address,
            window_s=settings.login_failure_window_s,
        ),
    )
    store = CloudIdentityStore(db, SecretBox(secret_key(settings, signing_key)))
    authority = SelfGoverned()
    sessions = SessionFlows(store, signer, settings.refresh_token_ttl_s, events, address_of)
    mfa = MfaFlows(
        store,
        sessions,
        throttle,
        events,
        authority,
        address_of,
        issuer_name=settings.site_name,
        challenge_ttl_s=settings.mfa_challenge_ttl_s,
        clock=clock,
    )
    app[SESSIONS] = sessions
    app[MFA] = mfa
    sender = mail or mail_sender(smtp_settings(settings))
    app[AUTH_FLOWS] = AccountFlows(
        store,
        sender,
        events,
        FlowPolicy(
            registration_enabled=settings.registration_enabled,
            verify_token_ttl_s=settings.verify_token_ttl_s,
            reset_token_ttl_s=settings.reset_token_ttl_s,
            site_name=settings.site_name,
        ),
        authority,
        address_of,
    )
    app[API_KEYS] = ApiKeyFlows(store, events, authority)
    app[API_KEY_AUTH] = ApiKeyAuthenticator(db)
    app[LOGIN] = LoginFlow(
        store,
        sessions,
        mfa,
        throttle,
        events,
        address_of,
        # Unverified accounts sign in only where nobody could verify them (no mail).
        require_verified=not isinstance(sender, LogMailSender),
    )
    return IdentityService(db, verifier)
