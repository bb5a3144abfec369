"""The web chat's routes on a real aiohttp server and store, with an intake that records
what it was handed: sites and origins refused before anything is stored, retried posts not
doubled, an event stream that resumes after the last change, files only for their visitor."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from connectors.base import InboundEvent, IntakeResult, IntakeStatus, OutboundChunk, OutboundFile
from connectors.web import WebConnector
from gateway.config import WebChannel, WebSite
from gateway.store.db import Database, open_database

TOKEN = "site-token-0123456789"
ORIGIN = "http://127.0.0.1:5555"


class Env:
    def __init__(self, connector: WebConnector, server: TestServer, events: list[InboundEvent]) -> None:
        self.c = connector
        self.server = server
        self.events = events

    def url(self, path: str) -> str:
        return str(self.server.make_url(f"/chat/web/{path}"))

    def session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))

    async def hello(self, s: aiohttp.ClientSession, origin: str = ORIGIN, token: str = TOKEN) -> int:
        async with s.post(self.url("api/hello"), headers={"Origin": origin, "X-Talon-Site": token}) as r:
            return r.status

    async def post(
        self, s: aiohttp.ClientSession, event_id: str, text: str, **kw: Any
    ) -> aiohttp.ClientResponse:
        headers = {"Origin": ORIGIN, "X-Talon-Site": TOKEN, **kw.pop("headers", {})}
        async with s.post(
            self.url("api/messages"), json={"event_id": event_id, "text": text}, headers=headers
        ) as r:
            await r.read()
            return r


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    db: Database = await open_database(tmp_path / "talon.db")
    settings = WebChannel(
        name="web", type="web", sites=[WebSite(token=TOKEN, origins=[ORIGIN])], max_attachment_bytes=1000
    )
    connector = WebConnector(settings, files_dir=tmp_path / "files", db=db, data_path=tmp_path)
    events: list[InboundEvent] = []
    seen: set[str] = set()

    async def intake(event: InboundEvent) -> IntakeResult:
        events.append(event)
        status = IntakeStatus.DUPLICATE if event.event_id in seen else IntakeStatus.ACCEPTED
        seen.add(event.event_id)
        return IntakeResult(status, thread_id=1)

    await connector.start(intake)
    app = web.Application()
    connector.install(app)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield Env(connector, server, events)
    finally:
        await connector.stop()
        await server.close()
        await db.close()


async def read_events(resp: aiohttp.ClientResponse, count: int) -> list[dict[str, Any]]:
    """The next ``count`` message events of a stream (bounded in time)."""
    found: list[dict[str, Any]] = []
    event, seq = "", None
    async with asyncio.timeout(10):
        while len(found) < count:
            line = (await resp.content.readline()).decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("id: "):
                seq = int(line[4:])
            elif line.startswith("data: ") and event == "message":
                found.append({**json.loads(line[6:]), "_id": seq})
    return found


async def test_a_wrong_origin_or_token_is_refused_and_nothing_is_stored(env: Env) -> None:
    async with env.session() as s:
        assert await env.hello(s, origin="http://127.0.0.1:6666") == 403
        assert await env.hello(s, token="not-the-token-at-all") == 403
        assert await env.hello(s) == 200
        evil = await env.post(s, "event-000001", "hi", headers={"Origin": "http://evil.test"})
        assert evil.status == 403
        assert "Access-Control-Allow-Origin" not in evil.headers
        wrong = await env.post(s, "event-000002", "hi", headers={"X-Talon-Site": "x" * 20})
        assert wrong.status == 403
    async with env.session() as anonymous:  # a site's page without the visitor cookie
        assert (await env.post(anonymous, "event-000003", "hi")).status == 401
    assert env.events == []
    assert await env.c.changes("x" * 26, 0, 10) == []


async def test_a_retried_post_is_one_message(env: Env) -> None:
    async with env.session() as s:
        await env.hello(s)
        first = await env.post(s, "event-abcdef01", "hello there")
        again = await env.post(s, "event-abcdef01", "hello there")
        assert first.status == again.status == 200
        assert first.headers["Access-Control-Allow-Origin"] == ORIGIN
        visitor = env.events[0].thread_key.chat_id
    assert {e.event_id for e in env.events} == {f"{visitor}:event-abcdef01"}
    shown = await env.c.changes(visitor, 0, 10)
    assert [(m.role, m.body) for m in shown] == [("user", "hello there")]


async def test_the_stream_resumes_after_the_last_change_and_never_doubles(env: Env) -> None:
    async with env.session() as s:
        await env.hello(s)
        await env.post(s, "event-00000001", "question")
        key = env.events[0].thread_key
        chunk = env.c.render("**bold** <script>alert(1)</script>")[0]
        await env.c.send(OutboundChunk(7, key, chunk))
        await env.c.send(OutboundChunk(7, key, chunk))  # the outbox repeating a delivery after a crash
        headers = {"Origin": ORIGIN}
        async with s.get(env.url("api/events"), headers=headers) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            first = await read_events(resp, 2)
        assert [m["role"] for m in first] == ["user", "bot"]
        assert first[1]["body"] == "<p><strong>bold</strong> &lt;script&gt;alert(1)&lt;/script&gt;</p>\n"
        preview = await env.c.message_editor.post(key, "writ", None)
        await env.c.send(OutboundChunk(8, key, env.c.render("second")[0]))
        last = first[-1]["_id"]
        async with s.get(env.url("api/events"), headers={**headers, "Last-Event-ID": str(last)}) as resp:
            resumed = await read_events(resp, 2)
            assert [m["body"] for m in resumed] == ["writ", "<p>second</p>\n"]
            await env.c.message_editor.delete(key, str(preview.platform_message_id))
            (gone,) = await read_events(resp, 1)
        assert gone["deleted"] and gone["id"] == int(str(preview.platform_message_id))
        ids = [m["_id"] for m in first + resumed + [gone]]
        assert ids == sorted(set(ids))


async def test_a_file_is_downloaded_only_by_its_visitor(env: Env, tmp_path: Path) -> None:
    source = tmp_path / "report.txt"
    source.write_text("the report")
    async with env.session() as owner, env.session() as other:
        await env.hello(owner)
        await env.hello(other)
        await env.post(owner, "event-00000009", "send me the report")
        key = env.events[0].thread_key
        sent = await env.c.send_file(OutboundFile(11, key, str(source), "report.txt", 10))
        url = env.url(f"api/files/{sent.platform_message_id}")
        async with owner.get(url) as r:
            assert r.status == 200
            assert await r.read() == b"the report"
            assert r.headers["Content-Disposition"].startswith("attachment")
            assert r.headers["Content-Type"] == "application/octet-stream"
        async with other.get(url) as r:
            assert r.status == 404


async def test_an_upload_over_the_cap_is_skipped_with_a_note(env: Env) -> None:
    async with env.session() as s:
        await env.hello(s)
        form = aiohttp.FormData()
        form.add_field("event_id", "event-upload01")
        form.add_field("text", "two files")
        form.add_field("file", b"small file", filename="notes.txt", content_type="text/plain")
        form.add_field("file", b"x" * 5000, filename="big.bin")
        headers = {"Origin": ORIGIN, "X-Talon-Site": TOKEN}
        async with s.post(env.url("api/messages"), data=form, headers=headers) as r:
            assert r.status == 200
    (event,) = env.events
    assert [a.name for a in event.attachments] == ["notes.txt"]
    assert await asyncio.to_thread(Path(event.attachments[0].path).read_bytes) == b"small file"
    assert "big.bin skipped" in event.text
