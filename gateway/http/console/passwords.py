"""Password hashes for console users: argon2id (argon2-cffi's defaults), checked in constant
time, off the event loop (a check takes tens of milliseconds by design)."""

from __future__ import annotations

import asyncio
from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

__all__ = ["MIN_LENGTH", "hash_password", "verify_password"]

MIN_LENGTH = 10
_HASHER = PasswordHasher()


@cache
def _dummy_hash() -> str:
    """Checked against when the user does not exist, so an unknown name costs as much as a
    wrong password and timing tells nothing."""
    return _HASHER.hash("no such user: timing is the same")


def hash_password(password: str) -> str:
    """The argon2id hash of ``password`` to put in ``console.users[].password_hash``.

    Raises:
        ValueError: shorter than :data:`MIN_LENGTH` characters.
    """
    if len(password) < MIN_LENGTH:
        raise ValueError(f"the password needs at least {MIN_LENGTH} characters")
    return _HASHER.hash(password)


def _verify(stored: str | None, password: str) -> bool:
    try:
        return _HASHER.verify(stored or _dummy_hash(), password) and stored is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


async def verify_password(stored: str | None, password: str) -> bool:
    """Whether ``password`` matches ``stored`` (None: an unknown user, always False)."""
    return await asyncio.to_thread(_verify, stored, password)
