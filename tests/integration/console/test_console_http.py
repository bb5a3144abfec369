"""The console over real HTTP in process: sign-in, sessions, CSRF, roles, rate limit, pages
escaping stored markup, the audit of every sign-in and change, the event stream."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.config import Settings
from gateway.console_settings import ConsoleSettings, ConsoleUser
from gateway.http.console.feature import ConsoleDeps, ConsoleFeature
from gateway.http.console.passwords import hash_password
from gateway.http.security import install_security_headers
from gateway.status import StatusReport
from gateway.store.db import Database, open_database
from gateway.store.outbox import count_by_status as outbox_counts
from gateway.store.queue import count_by_status as queue_counts
from gateway.store.queue import dead_letters
from tests.console_seed import HOSTILE, Seeded, seed_database
from tests.store_helpers import fetch_row, fetch_rows

PASSWORD = "correct horse battery"
HASH = hash_password(PASSWORD)


class DbStatus:
    def __init__(self, db: Database):
        self.db = db

    async def report(self) -> StatusReport:
        return StatusReport(
            pid=os.getpid(),
            uptime=1.0,
            channels={},
            running_turns=0,
            queue=await self.db.read(queue_counts),
            outbox=await self.db.read(outbox_counts),
            dead_letters=await self.db.read(dead_letters, 20),
        )


@dataclass
class Console:
    url: str
    db: Database
    seeded: Seeded
    notified: list[int]

    def client(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


@pytest_asyncio.fixture
async def console(tmp_path) -> AsyncIterator[Console]:
    db = await open_database(tmp_path / "talon.db")
    seeded = await seed_database(db)
    users = [
        ConsoleUser(name="ada", role="admin", password_hash=HASH),
        ConsoleUser(name="val", role="viewer", password_hash=HASH),
    ]
    settings = Settings(console=ConsoleSettings(users=users, login_attempts=3))
    notified: list[int] = []
    feature = ConsoleFeature(ConsoleDeps(db, settings, {}, DbStatus(db), notified.append))
    app = web.Application()
    install_security_headers(app)
    feature.install(app)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield Console(str(server.make_url("")).rstrip("/"), db, seeded, notified)
    finally:
        await server.close()
        await db.close()


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, html[:500]
    return match.group(1)


async def sign_in(
    c: Console, http: aiohttp.ClientSession, name: str, password: str = PASSWORD
) -> aiohttp.ClientResponse:
    async with http.get(f"{c.url}/console/login") as form:
        token = _csrf(await form.text())
    resp = await http.post(
        f"{c.url}/console/login",
        data={"csrf": token, "name": name, "password": password, "next": ""},
        allow_redirects=False,
    )
    await resp.read()
    return resp


async def page_csrf(c: Console, http: aiohttp.ClientSession) -> str:
    async with http.get(f"{c.url}/console/") as resp:
        return _csrf(await resp.text())


async def test_signed_out_users_are_sent_to_sign_in_and_refused_changes(console: Console) -> None:
    async with console.client() as http:
        async with http.get(f"{console.url}/console/threads", allow_redirects=False) as resp:
            assert resp.status == 303
            assert resp.headers["Location"].startswith("/console/login?next=")
        async with http.get(f"{console.url}/console/events") as resp:
            assert resp.status == 401
        async with http.post(
            f"{console.url}/console/dead-letters/{console.seeded.dead_letter}/retry", data={}
        ) as resp:
            assert resp.status == 401
    row = await fetch_row(
        console.db, "SELECT status FROM queue_items WHERE id = ?", (console.seeded.dead_letter,)
    )
    assert row["status"] == "dead"


async def test_sign_in_sets_a_strict_http_only_cookie_and_is_audited(console: Console) -> None:
    async with console.client() as http:
        wrong = await sign_in(console, http, "ada", "not the password")
        assert wrong.status == 401
        resp = await sign_in(console, http, "ada")
        assert resp.status == 303 and resp.headers["Location"] == "/console/"
        cookie = next(
            v for k, v in resp.headers.items() if k.lower() == "set-cookie" and "talon_session=" in v
        )
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        async with http.get(f"{console.url}/console/") as page:
            assert page.status == 200
            assert "ada (admin)" in await page.text()
            assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    rows = await fetch_rows(
        console.db, "SELECT decision, detail FROM audit_log WHERE tool = 'console.sign_in' ORDER BY id"
    )
    assert [r["decision"] for r in rows] == ["refused", "allowed"]
    assert all(PASSWORD not in r["detail"] and "not the password" not in r["detail"] for r in rows)


async def test_failed_sign_ins_are_limited_per_address_and_user(console: Console) -> None:
    async with console.client() as http:
        for _ in range(3):
            assert (await sign_in(console, http, "ada", "guess")).status == 401
        limited = await sign_in(console, http, "ada")  # even the right password waits now
        assert limited.status == 429
        assert (await sign_in(console, http, "val")).status == 303  # another user is not held up


async def test_a_change_needs_the_csrf_token_and_an_admin(console: Console) -> None:
    letter = console.seeded.dead_letter
    async with console.client() as viewer:
        assert (await sign_in(console, viewer, "val")).status == 303
        token = await page_csrf(console, viewer)
        async with viewer.post(
            f"{console.url}/console/dead-letters/{letter}/retry", data={"csrf": token}
        ) as resp:
            assert resp.status == 403
            assert "Viewers may look" in await resp.text()
    async with console.client() as admin:
        assert (await sign_in(console, admin, "ada")).status == 303
        async with admin.post(
            f"{console.url}/console/dead-letters/{letter}/retry", data={"csrf": "forged"}
        ) as resp:
            assert resp.status == 403
        row = await fetch_row(console.db, "SELECT status FROM queue_items WHERE id = ?", (letter,))
        assert row["status"] == "dead"
        token = await page_csrf(console, admin)
        async with admin.post(
            f"{console.url}/console/dead-letters/{letter}/retry", data={"csrf": token}
        ) as resp:
            assert resp.status == 200 and "retry done" in await resp.text()
    row = await fetch_row(console.db, "SELECT status, attempts FROM queue_items WHERE id = ?", (letter,))
    assert (row["status"], row["attempts"]) == ("pending", 0)
    assert console.notified == [console.seeded.thread_id]
    audit = await fetch_rows(
        console.db,
        "SELECT decision, status, detail FROM audit_log WHERE tool = 'console.dead_letter.retry' ORDER BY id",
    )
    assert [(a["decision"], a["status"]) for a in audit] == [
        ("refused", None),
        ("refused", None),
        ("allowed", "ok"),
    ]
    assert audit[0]["detail"].startswith("user val")


async def test_stored_markup_is_shown_as_text(console: Console) -> None:
    async with console.client() as http:
        await sign_in(console, http, "val")
        async with http.get(f"{console.url}/console/threads/{console.seeded.thread_id}") as resp:
            html = await resp.text()
    assert "<script>window.pwned" not in html and "onerror=" not in html.replace("onerror=&#34;", "")
    assert 'href="javascript:' not in html
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html
    assert HOSTILE not in html


async def test_pages_show_a_thread_its_run_trace_and_the_schedules(console: Console) -> None:
    async with console.client() as http:
        await sign_in(console, http, "ada")
        async with http.get(f"{console.url}/console/threads/{console.seeded.thread_id}") as resp:
            html = await resp.text()
            assert "message 0 of thread 0" in html and "The answer is **42**." in html and "favourite" in html
        async with http.get(f"{console.url}/console/runs/{console.seeded.run_id}") as resp:
            html = await resp.text()
            assert "memory_update" in html and "420 ms" in html
        for path in (
            "/schedules",
            f"/schedules/{console.seeded.schedule_id}",
            "/audit?tool=console.",
            "/usage?by=model",
            "/personas",
            "/threads",
        ):
            async with http.get(f"{console.url}/console{path}") as resp:
                assert resp.status == 200, path
        async with http.get(f"{console.url}/console/threads/999999") as resp:
            assert resp.status == 404


async def test_pausing_a_schedule_and_running_it_now(console: Console) -> None:
    sid = console.seeded.schedule_id
    async with console.client() as http:
        await sign_in(console, http, "ada")
        token = await page_csrf(console, http)
        async with http.post(f"{console.url}/console/schedules/{sid}/pause", data={"csrf": token}) as resp:
            assert resp.status == 200 and "paused" in await resp.text()
        async with http.post(f"{console.url}/console/schedules/{sid}/run", data={"csrf": token}) as resp:
            assert resp.status == 409 and "resume it first" in await resp.text()
        async with http.post(f"{console.url}/console/schedules/{sid}/resume", data={"csrf": token}) as resp:
            assert resp.status == 200
        before = time.time()
        async with http.post(f"{console.url}/console/schedules/{sid}/run", data={"csrf": token}) as resp:
            assert resp.status == 200
    row = await fetch_row(console.db, "SELECT enabled, next_run_at FROM schedules WHERE id = ?", (sid,))
    assert row["enabled"] == 1 and before - 1 <= row["next_run_at"] <= time.time()


async def test_the_event_stream_sends_status_to_a_signed_in_session(console: Console) -> None:
    async with console.client() as http:
        await sign_in(console, http, "val")
        async with http.get(f"{console.url}/console/events") as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            lines = []
            async for raw in resp.content:
                lines.append(raw.decode().strip())
                if lines[-1].startswith("data:"):
                    break
    assert lines[0] == "event: status"
    data = json.loads(lines[1].removeprefix("data:"))
    assert data["dead_letters"] == 1 and data["queue"] == {"dead": 1}


async def test_signing_out_ends_the_session(console: Console) -> None:
    async with console.client() as http:
        await sign_in(console, http, "ada")
        token = await page_csrf(console, http)
        async with http.post(f"{console.url}/console/logout", data={"csrf": token}) as resp:
            assert resp.status == 200 and "Sign in" in await resp.text()
        async with http.get(f"{console.url}/console/", allow_redirects=False) as resp:
            assert resp.status == 303


@pytest.mark.parametrize("target", ["https://evil.test/", "//evil.test/x", "/elsewhere"])
async def test_sign_in_returns_only_to_console_pages(console: Console, target: str) -> None:
    async with console.client() as http:
        async with http.get(f"{console.url}/console/login") as form:
            token = _csrf(await form.text())
        async with http.post(
            f"{console.url}/console/login",
            data={"csrf": token, "name": "ada", "password": PASSWORD, "next": target},
            allow_redirects=False,
        ) as resp:
            assert resp.headers["Location"] == "/console/"
