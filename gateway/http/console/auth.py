"""Who is signed in to the console, and the checks every page and every change goes through.

Sign-in: a form whose own CSRF token is a double-submit cookie (no session exists yet), a limit
on failed attempts per address and user, argon2 checked in constant time (an unknown user costs
as much as a wrong password). A session is a random token in an HttpOnly, SameSite=Strict cookie
(Secure when ``http.public_url`` is https); changes are POSTs that must carry the session's CSRF
token and an admin's session. Sign-ins, sign-outs, changes and refusals are written to the audit
log (tool ``console.*``), never with a password.

Other HTTP features find the signed-in user with ``app[CONSOLE_AUTH].session_of(request)``.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from gateway.console_settings import ConsoleSettings
from gateway.errors import RefusedError
from gateway.http.console.login_limit import LoginLimiter
from gateway.http.console.passwords import verify_password
from gateway.http.console.sessions import Session, Sessions
from gateway.store.audit import AuditRow, add_entries
from gateway.store.db import Database

__all__ = ["CONSOLE_AUTH", "LOGIN_COOKIE", "SESSION_COOKIE", "ConsoleAuth", "ConsoleRefusedError"]

log = logging.getLogger("talon.console")

SESSION_COOKIE = "talon_session"
LOGIN_COOKIE = "talon_login"
MAX_NAME = 64
MAX_PASSWORD = 1024
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ConsoleRefusedError(RefusedError):
    """A request the console refuses: ``status`` and the sentence shown."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class ConsoleAuth:
    """Sessions, the sign-in limiter and the audit of the console.

    Args:
        settings (:class:`gateway.console_settings.ConsoleSettings`): ``console:`` of talon.yaml.
        db (:class:`gateway.store.db.Database`): Where the audit rows go.
        secure (:obj:`bool`): Whether cookies are marked Secure (the public URL is https).
    """

    def __init__(self, settings: ConsoleSettings, db: Database, *, secure: bool):
        self.settings = settings
        self.db = db
        self.secure = secure
        self.sessions = Sessions(settings.session_idle_minutes * 60, settings.session_max_hours * 3600)
        self.limiter = LoginLimiter(settings.login_attempts, settings.login_window_minutes * 60)

    # ------------------------------------------------------------ who is this

    def session_of(self, request: web.Request) -> Session | None:
        """The signed-in session of ``request``, or None."""
        return self.sessions.get(request.cookies.get(SESSION_COOKIE))

    # ------------------------------------------------------------ sign-in

    def login_token(self, request: web.Request) -> str:
        """The sign-in form's CSRF value: the one its cookie already holds, else a new one."""
        current = request.cookies.get(LOGIN_COOKIE, "")
        return current if 20 <= len(current) <= 100 else secrets.token_urlsafe(32)

    def set_login_cookie(self, response: web.StreamResponse, token: str) -> None:
        response.set_cookie(
            LOGIN_COOKIE, token, path="/console/", httponly=True, samesite="Strict", secure=self.secure
        )

    async def sign_in(self, request: web.Request, form: Any) -> tuple[str, Session]:
        """Check a posted sign-in form; returns the new session's token and the session.

        Raises:
            ConsoleRefusedError: a bad form token (403), too many failures (429), a wrong name or password (401).
        """
        sent, cookie = str(form.get("csrf", "")), request.cookies.get(LOGIN_COOKIE, "")
        if not cookie or not hmac.compare_digest(sent.encode(), cookie.encode()):
            raise ConsoleRefusedError(403, "The sign-in form expired; load it again and sign in.")
        name = str(form.get("name", ""))[:MAX_NAME].strip()
        password = str(form.get("password", ""))[:MAX_PASSWORD]
        address = request.remote or "unknown"
        wait = self.limiter.wait(address, name)
        if wait > 0:
            await self.audit(name, "console.sign_in", "refused", f"too many failed sign-ins from {address}")
            raise ConsoleRefusedError(429, f"Too many failed sign-ins; try again in {int(wait) + 1} seconds.")
        user = self.settings.user(name) if name else None
        if not await verify_password(user.password_hash if user else None, password) or user is None:
            self.limiter.failed(address, name)
            await self.audit(
                name or "-", "console.sign_in", "refused", f"wrong name or password from {address}"
            )
            raise ConsoleRefusedError(401, "Wrong name or password.")
        self.limiter.succeeded(address, name)
        token, session = self.sessions.open(user.name, user.role)
        await self.audit(user.name, "console.sign_in", "allowed", f"{user.role} from {address}")
        return token, session

    def set_session_cookie(self, response: web.StreamResponse, token: str) -> None:
        response.set_cookie(
            SESSION_COOKIE,
            token,
            path="/",
            httponly=True,
            samesite="Strict",
            secure=self.secure,
            max_age=int(self.sessions.absolute),
        )
        response.del_cookie(LOGIN_COOKIE, path="/console/")

    async def sign_out(self, request: web.Request, response: web.StreamResponse) -> None:
        session = self.session_of(request)
        self.sessions.close(request.cookies.get(SESSION_COOKIE))
        response.del_cookie(SESSION_COOKIE, path="/")
        if session is not None:
            await self.audit(session.user, "console.sign_out", "allowed", None)

    # ------------------------------------------------------------ checks

    def viewer(self, request: web.Request) -> Session:
        """The session of a page's request.

        Raises:
            ConsoleRefusedError: nobody is signed in (401).
        """
        session = self.session_of(request)
        if session is None:
            raise ConsoleRefusedError(401, "Sign in first.")
        return session

    async def changer(self, request: web.Request, form: Any, what: str) -> Session:
        """The session of a change's request: signed in, the CSRF token sent back, an admin.

        Raises:
            ConsoleRefusedError: signed out (401), a missing or wrong CSRF token (403), a viewer (403).
        """
        session = self.session_of(request)
        if session is None:
            raise ConsoleRefusedError(401, "Sign in first.")
        sent = form.get("csrf") or request.headers.get("X-CSRF-Token")
        if not session.csrf_matches(sent):
            await self.audit(session.user, what, "refused", "missing or wrong CSRF token")
            raise ConsoleRefusedError(
                403, "This form expired or did not come from the console; reload the page."
            )
        if not session.admin:
            await self.audit(session.user, what, "refused", "viewers may not change anything")
            raise ConsoleRefusedError(403, "Viewers may look but not change anything; ask an admin.")
        return session

    async def audit(
        self, user: str, what: str, decision: str, detail: str | None, status: str | None = None
    ) -> None:
        """One audit row for a console action by ``user`` (its detail starts with the user)."""
        text = f"user {user}" + (f": {detail}" if detail else "")
        row = AuditRow(time.time(), None, None, None, what, decision, status, text[:500])
        try:
            await self.db.run_transaction(add_entries, [row])
        except Exception:  # the action's outcome stands; the log says the audit row is missing
            log.exception("could not write the audit row of %s", what)


CONSOLE_AUTH: web.AppKey[ConsoleAuth] = web.AppKey("console_auth", ConsoleAuth)
