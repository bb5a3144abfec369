"""The console's changes: retry or drop a dead letter; pause, resume or run a schedule now.
The same functions as ``talon dead-letters`` and ``talon schedules`` apply them; each is
audited with its outcome."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web

from gateway.http.console.auth import ConsoleRefusedError
from gateway.http.console.sessions import Session

if TYPE_CHECKING:
    from gateway.http.console.context import Console

__all__ = ["Actions"]


class Actions:
    def __init__(self, feature: Console):
        self.f = feature
        self.db = feature.deps.db

    def routes(self) -> list[tuple[str, Any, str]]:
        return [
            ("/dead-letters/{id}/retry", self.dead_letter, "console.dead_letter.retry"),
            ("/dead-letters/{id}/drop", self.dead_letter, "console.dead_letter.drop"),
            ("/schedules/{id}/pause", self.schedule, "console.schedule.pause"),
            ("/schedules/{id}/resume", self.schedule, "console.schedule.resume"),
            ("/schedules/{id}/run", self.schedule, "console.schedule.run"),
        ]

    async def dead_letter(self, request: web.Request, session: Session, form: Any) -> web.StreamResponse:
        from gateway.dead_letters import manage

        action = request.path.rsplit("/", 1)[1]
        raw = request.match_info["id"]
        if not raw.isdigit():
            raise ConsoleRefusedError(404, f"There is no dead letter {raw!r}.")
        result = await manage(self.db, action, int(raw), notify=self.f.deps.notify)
        return await self._done(session, f"console.dead_letter.{action}", f"dead letter #{raw}", result, "/")

    async def schedule(self, request: web.Request, session: Session, form: Any) -> web.StreamResponse:
        from gateway.schedule_ops import manage

        action = request.path.rsplit("/", 1)[1]
        schedule_id = request.match_info["id"][:64]
        result = await manage(self.db, action, schedule_id)
        back = str(form.get("back", "")) == "schedule"
        where = f"/schedules/{quote(schedule_id)}" if back else "/schedules"
        return await self._done(
            session, f"console.schedule.{action}", f"schedule {schedule_id}", result, where
        )

    async def _done(
        self, session: Session, what: str, subject: str, result: dict[str, Any], where: str
    ) -> web.StreamResponse:
        from gateway.http.console.context import PREFIX

        ok = bool(result.get("ok"))
        detail = subject if ok else f"{subject}: {result.get('error')}"
        await self.f.auth.audit(session.user, what, "allowed", detail, status="ok" if ok else "error")
        if not ok:
            raise ConsoleRefusedError(409, str(result.get("error")))
        verb = what.rsplit(".", 1)[1]
        note = f"{subject}: {verb} done"
        raise web.HTTPSeeOther(f"{PREFIX}{where}?done={quote(note)}")
