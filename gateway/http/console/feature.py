"""The console as a feature of the HTTP server: its routes under ``/console/`` and the page
and change wrappers every handler goes through."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web

from gateway.http.console import actions, pages, stream
from gateway.http.console.auth import CONSOLE_AUTH, ConsoleRefusedError
from gateway.http.console.context import PREFIX, Console, ConsoleDeps, set_request
from gateway.http.console.sessions import Session

__all__ = ["PREFIX", "ConsoleDeps", "ConsoleFeature"]

STATIC = ("console.css", "console.js")
Page = Callable[[web.Request, Session], Awaitable[web.StreamResponse]]
Change = Callable[[web.Request, Session, Any], Awaitable[web.StreamResponse]]


class ConsoleFeature:
    """The operator console.

    Args:
        deps (:class:`ConsoleDeps`): The daemon's parts the pages read.
    """

    name = "console"

    def __init__(self, deps: ConsoleDeps):
        self.console = Console(deps)
        self.auth = self.console.auth
        self.render = self.console.render
        self._pages = pages.Pages(self.console)
        self._actions = actions.Actions(self.console)
        self._stream = stream.EventStream(self.console)
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
        self.console.stopping.set()  # event streams end, so the server stops without waiting on them

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
            set_request(request)
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


def _quote(path: str) -> str:
    from urllib.parse import quote

    return quote(path, safe="")
