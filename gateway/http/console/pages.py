"""The console's pages: sign-in, overview, threads, runs, personas, schedules, audit, usage.
Each reads through the store's bounded queries; nothing here writes."""

from __future__ import annotations

import time
from itertools import islice
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from aiohttp import web

from gateway.http.console.auth import ConsoleRefusedError
from gateway.http.console.sessions import Session
from gateway.store import console_views
from gateway.store.memory import list_items
from gateway.store.messages import newest_messages
from gateway.store.threads import get_thread, recent_threads
from gateway.store.traces import get_run, recent_runs, run_events
from gateway.store.usage import usage_by

if TYPE_CHECKING:
    from gateway.http.console.context import Console

__all__ = ["Pages"]

THREADS_SHOWN = 100
MESSAGES_SHOWN = 200
RUNS_SHOWN = 50
MEMORY_SHOWN = 100
EVENTS_SHOWN = 1000
USAGE_BY = ("persona", "user", "channel", "model")
USAGE_SINCE = {"1d": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400, "365d": 365 * 86_400}


def _int(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConsoleRefusedError(404, f"There is no {what} {value!r}.") from None


class Pages:
    def __init__(self, feature: Console):
        self.f = feature
        self.db = feature.deps.db

    def routes(self) -> list[tuple[str, Any]]:
        return [
            ("/", self.overview),
            ("/threads", self.threads),
            ("/threads/{id}", self.thread),
            ("/runs/{id}", self.run),
            ("/personas", self.personas),
            ("/personas/{name}", self.persona),
            ("/schedules", self.schedules),
            ("/schedules/{id}", self.schedule),
            ("/audit", self.audit),
            ("/usage", self.usage),
        ]

    # ------------------------------------------------------------ sign-in

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        if self.f.auth.session_of(request) is not None:
            raise web.HTTPSeeOther(_next(request.query.get("next")))
        return self._form(request, 200, None)

    def _form(self, request: web.Request, status: int, message: str | None) -> web.StreamResponse:
        token = self.f.auth.login_token(request)
        response = self.f.render(
            "login.html", None, status=status, csrf=token, message=message, next=request.query.get("next", "")
        )
        self.f.auth.set_login_cookie(response, token)
        return response

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        try:
            token, _ = await self.f.auth.sign_in(request, form)
        except ConsoleRefusedError as exc:
            response = self._form(request, exc.status, str(exc))
            if exc.status == 429:
                response.headers["Retry-After"] = "60"
            return response
        response = web.Response(status=303, headers={"Location": _next(str(form.get("next", "")))})
        self.f.auth.set_session_cookie(response, token)
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        session = self.f.auth.session_of(request)
        if session is not None and not session.csrf_matches(str(form.get("csrf", ""))):
            return self.f.render(
                "error.html", session, status=403, message="Reload the page and sign out again."
            )
        response = web.Response(status=303, headers={"Location": f"{self.f_prefix}/login"})
        await self.f.auth.sign_out(request, response)
        return response

    @property
    def f_prefix(self) -> str:
        from gateway.http.console.context import PREFIX

        return PREFIX

    # ------------------------------------------------------------ pages

    async def overview(self, request: web.Request, session: Session) -> web.StreamResponse:
        report = await self.f.deps.status.report()
        runs = await self.db.read(lambda conn: recent_runs(conn, limit=10))
        return self.f.render("overview.html", session, report=report, runs=runs, page="overview")

    async def threads(self, request: web.Request, session: Session) -> web.StreamResponse:
        rows = await self.db.read(recent_threads, THREADS_SHOWN)
        return self.f.render("threads.html", session, threads=rows, page="threads")

    async def thread(self, request: web.Request, session: Session) -> web.StreamResponse:
        thread_id = _int(request.match_info["id"], "thread")

        def read(conn: Any) -> dict[str, Any] | None:
            thread = get_thread(conn, thread_id)
            if thread is None:
                return None
            return {
                "thread": thread,
                "messages": newest_messages(conn, thread_id, after=0, limit=MESSAGES_SHOWN)[::-1],
                "total": console_views.message_count(conn, thread_id),
                "runs": recent_runs(conn, limit=RUNS_SHOWN, thread_id=thread_id),
                "memory": list_items(conn, thread_id, limit=MEMORY_SHOWN),
            }

        data = await self.db.read(read)
        if data is None:
            raise ConsoleRefusedError(404, f"There is no thread {thread_id}.")
        return self.f.render("thread.html", session, page="threads", **data)

    async def run(self, request: web.Request, session: Session) -> web.StreamResponse:
        run_id = _int(request.match_info["id"], "run")

        def read(conn: Any) -> dict[str, Any] | None:
            run = get_run(conn, run_id)
            if run is None:
                return None
            return {"run": run, "events": list(islice(run_events(conn, run_id), EVENTS_SHOWN))}

        data = await self.db.read(read)
        if data is None:
            raise ConsoleRefusedError(404, f"There is no run {run_id}.")
        return self.f.render("run.html", session, page="threads", **data)

    async def personas(self, request: web.Request, session: Session) -> web.StreamResponse:
        rows = [self._persona(p) for p in self.f.deps.personas.values()]
        return self.f.render("personas.html", session, personas=rows, page="personas")

    async def persona(self, request: web.Request, session: Session) -> web.StreamResponse:
        persona = self.f.deps.personas.get(request.match_info["name"])
        if persona is None:
            raise ConsoleRefusedError(404, f"There is no persona {request.match_info['name']!r}.")
        return self.f.render("persona.html", session, p=self._persona(persona), page="personas")

    def _persona(self, persona: Any) -> dict[str, Any]:
        from tools.registry import tools_for

        bindings = [b for b in self.f.deps.settings.bindings if b.persona == persona.name]
        return {
            "name": persona.name,
            "model": persona.model_ref,
            "fallbacks": persona.fallbacks,
            "description": persona.description,
            "labels": [(label, [t.mcp_name for t in tools_for([label])]) for label in persona.capabilities],
            "skills": list(zip(persona.skills, persona.skill_descriptions, strict=False)),
            "subagents": persona.subagents,
            "mcp_servers": sorted(persona.mcp_servers),
            "bindings": [b.channel if b.chat is None else f"{b.channel} (chat {b.chat})" for b in bindings],
        }

    async def schedules(self, request: web.Request, session: Session) -> web.StreamResponse:
        from gateway.scheduler import list_schedules

        rows = await list_schedules(self.db)
        return self.f.render("schedules.html", session, schedules=rows, page="schedules")

    async def schedule(self, request: web.Request, session: Session) -> web.StreamResponse:
        from gateway.schedule_ops import manage
        from gateway.scheduler import list_schedules

        schedule_id = request.match_info["id"]
        found = [s for s in await list_schedules(self.db) if s["id"] == schedule_id]
        if not found:
            raise ConsoleRefusedError(404, f"There is no schedule {schedule_id!r}.")
        history = await manage(self.db, "history", schedule_id)
        runs = history.get("runs", [])[::-1]
        return self.f.render("schedule.html", session, s=found[0], runs=runs, page="schedules")

    async def audit(self, request: web.Request, session: Session) -> web.StreamResponse:
        q = request.query
        filters = {
            "tool": q.get("tool", "").strip()[:100] or None,
            "decision": q.get("decision") if q.get("decision") in ("allowed", "refused", "result") else None,
            "persona": q.get("persona", "").strip()[:100] or None,
        }
        before = q.get("before", "")
        since = USAGE_SINCE.get(q.get("since", ""))
        rows = await self.db.read(
            lambda conn: console_views.audit_page(
                conn,
                **filters,
                since=time.time() - since if since else None,
                before_id=int(before) if before.isdigit() else None,
            )
        )
        return self.f.render(
            "audit.html", session, rows=rows, filters=filters, since=q.get("since", ""), page="audit"
        )

    async def usage(self, request: web.Request, session: Session) -> web.StreamResponse:
        by = request.query.get("by", "persona")
        by = by if by in USAGE_BY else "persona"
        since = request.query.get("since", "7d")
        since = since if since in USAGE_SINCE else "7d"
        rows = await self.db.read(usage_by, by, since=time.time() - USAGE_SINCE[since])  # type: ignore[arg-type]
        return self.f.render(
            "usage.html",
            session,
            rows=rows,
            by=by,
            since=since,
            choices=USAGE_BY,
            periods=list(USAGE_SINCE),
            currency=self.f.deps.settings.currency,
            page="usage",
        )


def _next(value: str | None) -> str:
    """Where to go after signing in: a console or web chat path only, never another site."""
    from gateway.http.console.context import PREFIX

    target = unquote(value or "")
    if target.startswith((f"{PREFIX}/", "/chat/")) and "\\" not in target:
        return target
    return f"{PREFIX}/"
