"""Password hashing with Argon2id in PHC string format (docs/design.md section 4).

Parameters follow OWASP's Password Storage Cheat Sheet minimum for Argon2id (m=19 MiB, t=2, p=1),
which keeps a login under ~50 ms on a Raspberry Pi 4 class CPU.
"""

from __future__ import annotations

import asyncio
import os

from cryptography.exceptions import InvalidKey
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

__all__ = [
    "DUMMY_HASH",
    "check_password",
    "hash_password",
    "new_password_hash",
    "verify_password",
]

_MEMORY_KIB = 19_456
_ITERATIONS = 2
_LANES = 1


def hash_password(password: str) -> str:
    """Hash a password with a fresh salt; the result carries its own parameters."""
    kdf = Argon2id(
        salt=os.urandom(16),
        length=32,
        iterations=_ITERATIONS,
        lanes=_LANES,
        memory_cost=_MEMORY_KIB,
    )
    return kdf.derive_phc_encoded(password.encode())


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``password`` matches the PHC-encoded hash (constant time inside the KDF)."""
    try:
        Argon2id.verify_phc_encoded(password.encode(), encoded)
    except (InvalidKey, ValueError):
        return False
    return True


DUMMY_HASH = hash_password(os.urandom(16).hex())
"""Verified against when the account does not exist, so timing does not reveal it."""


async def check_password(password: str, encoded: str | None) -> bool:
    """Verify off the event loop (Argon2id takes tens of ms); ``None`` checks a dummy hash so
    that timing does not reveal whether an account exists."""
    return await asyncio.to_thread(verify_password, password, encoded or DUMMY_HASH)


async def new_password_hash(password: str) -> str:
    """Hash a new password off the event loop."""
    return await asyncio.to_thread(hash_password, password)
