"""Signed-in sessions of the web console, kept in memory: a restart signs everyone out.

The cookie carries a random token; only its SHA-256 is kept, so a memory dump or a log line
with a key cannot be replayed. A session ends when unused for ``idle`` seconds or ``absolute``
seconds after sign-in, whichever comes first. Each holds its own CSRF token, which every
change must send back.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.console_settings import Role

__all__ = ["MAX_SESSIONS", "Session", "Sessions"]

MAX_SESSIONS = 1000  # beyond this the oldest session ends: memory stays bounded


@dataclass(slots=True)
class Session:
    user: str
    role: Role
    csrf: str
    created_at: float
    last_seen: float

    @property
    def admin(self) -> bool:
        return self.role == "admin"

    def csrf_matches(self, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(self.csrf.encode(), str(sent).encode())


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Sessions:
    """Open sessions by token.

    Args:
        idle (:obj:`float`): Seconds a session lasts unused.
        absolute (:obj:`float`): Seconds a session lasts at most.
        clock (Callable[[], :obj:`float`], optional): Now, in seconds (tests pass their own).
    """

    def __init__(self, idle: float, absolute: float, clock: Callable[[], float] = time.time):
        self.idle = idle
        self.absolute = absolute
        self.clock = clock
        self._open: dict[str, Session] = {}

    def open(self, user: str, role: Role) -> tuple[str, Session]:
        """A new session for ``user``; returns the cookie's token and the session."""
        now = self.clock()
        if len(self._open) >= MAX_SESSIONS:
            self._sweep(now)
            while len(self._open) >= MAX_SESSIONS:
                del self._open[next(iter(self._open))]
        token = secrets.token_urlsafe(32)
        session = Session(user, role, secrets.token_urlsafe(32), now, now)
        self._open[_digest(token)] = session
        return token, session

    def get(self, token: str | None) -> Session | None:
        """The live session of ``token`` (now marked used), or None when there is none or it ended."""
        if not token:
            return None
        key = _digest(token)
        session = self._open.get(key)
        if session is None:
            return None
        now = self.clock()
        if self._expired(session, now):
            del self._open[key]
            return None
        session.last_seen = now
        return session

    def alive(self, session: Session) -> bool:
        """Whether ``session`` is still open (an event stream checks before each message)."""
        return not self._expired(session, self.clock()) and session in self._open.values()

    def close(self, token: str | None) -> None:
        if token:
            self._open.pop(_digest(token), None)

    def end_user(self, user: str) -> int:
        """End every session of ``user``; returns how many."""
        keys = [k for k, s in self._open.items() if s.user == user]
        for key in keys:
            del self._open[key]
        return len(keys)

    def __len__(self) -> int:
        return len(self._open)

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.last_seen > self.idle or now - session.created_at > self.absolute

    def _sweep(self, now: float) -> None:
        for key in [k for k, s in self._open.items() if self._expired(s, now)]:
            del self._open[key]
