"""What every console handler shares: the daemon's parts, the auth, the templates (Jinja2,
autoescaped) and the stop signal of the event streams."""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web
from jinja2 import Environment, PackageLoader, select_autoescape

from gateway.http.console.auth import ConsoleAuth
from gateway.http.console.sessions import Session
from gateway.store.db import Database

if TYPE_CHECKING:
    from gateway.config import Settings
    from gateway.personas import Persona
    from gateway.status import StatusReport

__all__ = ["PREFIX", "Console", "ConsoleDeps", "set_request"]

PREFIX = "/console"
STATIC = ("console.css", "console.js")
_REQUEST: contextvars.ContextVar[web.Request | None] = contextvars.ContextVar("console_request", default=None)
Page = Callable[[web.Request, Session], Awaitable[web.StreamResponse]]
Change = Callable[[web.Request, Session, Any], Awaitable[web.StreamResponse]]


class StatusSource(Protocol):
    async def report(self) -> StatusReport: ...


@dataclass(frozen=True, slots=True)
class ConsoleDeps:
    """What the console reads and acts on, handed over by the daemon."""

    db: Database
    settings: Settings
    personas: Mapping[str, Persona]
    status: StatusSource
    notify: Callable[[int], None]  # a thread has queue work again (a retried dead letter)


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("gateway.http.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["json"] = lambda value: json.dumps(value, indent=1, ensure_ascii=False, default=str)
    return env


def set_request(request: web.Request) -> None:
    """The request being served, for the page chrome (its ``done`` note)."""
    _REQUEST.set(request)


class Console:
    """The shared state of one console."""

    def __init__(self, deps: ConsoleDeps):
        if deps.settings.console is None:
            raise ValueError("the console needs console: in talon.yaml")
        http = getattr(deps.settings, "http", None)
        public = getattr(http, "public_url", None) or ""
        self.deps = deps
        self.auth = ConsoleAuth(deps.settings.console, deps.db, secure=public.startswith("https://"))
        self.templates = _environment()
        self.stopping = asyncio.Event()
        # Web chat channels its users may chat on as themselves (linked from every page).
        self.chats = [
            ch.name
            for ch in deps.settings.channels
            if ch.type == "web" and ch.console_users  # type: ignore[union-attr]
        ]

    def render(
        self, template: str, session: Session | None, *, status: int = 200, **context: Any
    ) -> web.Response:
        page = self.templates.get_template(template)
        request = _REQUEST.get()
        done = request.query.get("done", "")[:200] if request is not None else ""
        text = page.render(session=session, prefix=PREFIX, request_done=done, chats=self.chats, **context)
        return web.Response(
            text=text,
            status=status,
            content_type="text/html",
            headers={"Cache-Control": "no-store"},
        )
