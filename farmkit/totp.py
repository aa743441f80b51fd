"""Time-based one-time passwords (RFC 6238) for MFA: secrets, provisioning URIs, code checks.

Parameters are the ones every authenticator app supports by default: HMAC-SHA1, 6 digits, 30 s
steps (RFC 6238 section 4; Google Authenticator "Key Uri Format"). Agent and cloud share this.
"""

from __future__ import annotations

import base64
import os
import time

from cryptography.hazmat.primitives.hashes import SHA1
from cryptography.hazmat.primitives.twofactor import InvalidToken
from cryptography.hazmat.primitives.twofactor.totp import TOTP

__all__ = ["DIGITS", "STEP_S", "matching_step", "new_totp_secret", "provisioning_uri", "totp_code"]

DIGITS = 6
STEP_S = 30
_SECRET_BYTES = 20  # 160 bits, the HMAC-SHA1 block-size recommendation of RFC 4226 section 4
_DRIFT_STEPS = 1  # one step either side for clock drift (RFC 6238 section 5.2)


def new_totp_secret() -> str:
    """A fresh shared secret, base32 without padding (as authenticator apps expect)."""
    return base64.b32encode(os.urandom(_SECRET_BYTES)).decode().rstrip("=")


def _totp(secret: str) -> TOTP:
    padded = secret + "=" * (-len(secret) % 8)
    # SHA-1 is what RFC 6238 and authenticator apps use; HMAC-SHA1 is not broken for this use.
    return TOTP(base64.b32decode(padded), DIGITS, SHA1(), STEP_S, enforce_key_length=False)


def provisioning_uri(secret: str, account: str, issuer: str) -> str:
    """The ``otpauth://totp/...`` URI an authenticator app scans as a QR code."""
    return _totp(secret).get_provisioning_uri(account, issuer)


def totp_code(secret: str, at: float | None = None) -> str:
    """The code for ``secret`` at time ``at`` (now by default)."""
    moment = time.time() if at is None else at
    return _totp(secret).generate(int(moment)).decode()


def matching_step(secret: str, code: str, at: float | None = None) -> int | None:
    """The time step ``code`` is valid for within the drift window, or ``None`` if it is wrong.

    The caller stores the step and refuses steps not after it, so a code is used once.
    """
    if len(code) != DIGITS or not code.isdigit():
        return None
    moment = time.time() if at is None else at
    totp = _totp(secret)
    for offset in range(-_DRIFT_STEPS, _DRIFT_STEPS + 1):
        candidate = int(moment) + offset * STEP_S
        try:
            totp.verify(code.encode(), candidate)  # constant-time compare inside
        except InvalidToken:
            continue
        return candidate // STEP_S
    return None
