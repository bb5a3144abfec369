"""The console as a feature of the HTTP server: its routes under ``/console/``, the page and
change wrappers every handler goes through, and the templates (Jinja2, autoescaped)."""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web
from jinja2 import Environment, PackageLoader, select_autoescape

from gateway.http.console.auth import CONSOLE_AUTH, ConsoleAuth, ConsoleRefusedError
from gateway.http.console.sessions import Session
from gateway.store.db import Database

if TYPE_CHECKING:
    from gateway.config import Settings
    from gateway.personas import Persona
    from gateway.status import StatusReport

__all__ = ["PREFIX", "ConsoleDeps", "ConsoleFeature"]

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


class ConsoleFeature:
    """The operator console.

    Args:
        deps (:class:`ConsoleDeps`): The daemon's parts the pages read.
    """

    name = "console"

    def __init__(self, deps: ConsoleDeps):
        from gateway.http.console import actions, pages, stream

        if deps.settings.console is None:
            raise ValueError("the console needs console: in talon.yaml")
        http = getattr(deps.settings, "http", None)
        public = getattr(http, "public_url", None) or ""
        self.deps = deps
        self.auth = ConsoleAuth(deps.settings.console, deps.db, secure=public.startswith("https://"))
        self.templates = _environment()
        self.stopping = asyncio.Event()
        self._pages = pages.Pages(self)
        self._actions = actions.Actions(self)
        self._stream = stream.EventStream(self)
        self._static = {
            name: (resources.files("gateway.http.console") / "static" / name).read_bytes() for name in STATIC
        }

    def install(self, app: web.Application) -> None:
        app[CONSOLE_AUTH] = self.auth
        app.on_shutdown.append(self._on_shutdown)
        r = app.router
        r.add_get(PREFIX, self._to_overview)
        r.add_get(f"{PREFIX}/login", self._pages.login_form)
        r.add_post(f"{PREFIX}/login", self._pages.login)
        r.add_post(f"{PREFIX}/logout", self._pages.logout)
        r.add_get(f"{PREFIX}/static/{{name}}", self._static_file)
        for path, handler in self._pages.routes():
            r.add_get(f"{PREFIX}{path}", self.page(handler))
        r.add_get(f"{PREFIX}/events", self.page(self._stream.serve))
        for path, handler, what in self._actions.routes():
            r.add_post(f"{PREFIX}{path}", self.change(handler, what))

    async def _on_shutdown(self, app: web.Application) -> None:
        self.stopping.set()  # event streams end, so the server stops without waiting on them

    async def _to_overview(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(f"{PREFIX}/")

    async def _static_file(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        body = self._static.get(name)
        if body is None:
            raise web.HTTPNotFound()
        kind = "text/css" if name.endswith(".css") else "text/javascript"
        return web.Response(body=body, content_type=kind, headers={"Cache-Control": "max-age=300"})

    # ------------------------------------------------------------ wrappers

    def page(self, handler: Page) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """A page: signed-out users are sent to the sign-in form (and come back after)."""

        async def serve(request: web.Request) -> web.StreamResponse:
            _REQUEST.set(request)
            session = self.auth.session_of(request)
            if session is None:
                if request.path.endswith("/events"):
                    raise web.HTTPUnauthorized(text="sign in first")
                raise web.HTTPSeeOther(f"{PREFIX}/login?next={_quote(request.path_qs)}")
            try:
                return await handler(request, session)
            except ConsoleRefusedError as exc:
                return self.render("error.html", session, status=exc.status, message=str(exc))

        return serve

    def change(self, handler: Change, what: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """A change: a POST from an admin's session carrying its CSRF token; audited."""

        async def serve(request: web.Request) -> web.StreamResponse:
            form = await request.post()
            try:
                session = await self.auth.changer(request, form, what)
            except ConsoleRefusedError as exc:
                return self.render(
                    "error.html", self.auth.session_of(request), status=exc.status, message=str(exc)
                )
            try:
                return await handler(request, session, form)
            except ConsoleRefusedError as exc:
                return self.render("error.html", session, status=exc.status, message=str(exc))

        return serve

    def render(
        self, template: str, session: Session | None, *, status: int = 200, **context: Any
    ) -> web.Response:
        page = self.templates.get_template(template)
        request = _REQUEST.get()
        done = request.query.get("done", "")[:200] if request is not None else ""
        text = page.render(session=session, prefix=PREFIX, request_done=done, **context)
        return web.Response(
            text=text,
            status=status,
            content_type="text/html",
            headers={"Cache-Control": "no-store"},
        )


def _quote(path: str) -> str:
    from urllib.parse import quote

    return quote(path, safe="")
