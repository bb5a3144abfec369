"""Console users chatting on Talon's own web chat page: a real aiohttp server with the
console's sign-in sessions, a real store and an intake that records what it was handed.
A signed-in user chats as themselves (their posts carry the session's CSRF token); a listed
site's page cannot use the operator's session; nobody signed in is sent to sign in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from connectors.base import InboundEvent, IntakeResult, IntakeStatus, OutboundChunk, RenderedChunk, ThreadKey
from connectors.web import WebConnector
from gateway.config import WebChannel, WebSite
from gateway.console_settings import ConsoleSettings
from gateway.http.console.auth import CONSOLE_AUTH, SESSION_COOKIE, ConsoleAuth
from gateway.store.db import Database, open_database
from tests.integration.web.test_web_routes import read_events

TOKEN = "site-token-0123456789"
SITE = "http://127.0.0.1:5555"


class Env:
    def __init__(
        self, c: WebConnector, server: TestServer, auth: ConsoleAuth | None, events: list[InboundEvent]
    ) -> None:
        self.c = c
        self.server = server
        self.auth = auth
        self.events = events
        self.own = f"http://127.0.0.1:{server.port}"

    def url(self, path: str) -> str:
        return str(self.server.make_url(f"/chat/web/{path}"))

    def signed_in(self, user: str = "Alice") -> tuple[aiohttp.ClientSession, str]:
        """A browser holding ``user``'s console session cookie, and that session's token."""
        assert self.auth is not None
        token, _ = self.auth.sessions.open(user, "viewer")
        jar = aiohttp.CookieJar(unsafe=True)
        jar.update_cookies({SESSION_COOKIE: token}, self.server.make_url("/"))
        return aiohttp.ClientSession(cookie_jar=jar), token

    async def hello(self, s: aiohttp.ClientSession, **headers: str) -> tuple[int, dict[str, Any]]:
        async with s.post(self.url("api/hello"), headers=headers) as r:
            self.cookies_set = r.headers.getall("Set-Cookie", [])
            return r.status, await r.json()

    async def bot_says(self, chat: str, text: str) -> None:
        """What a reply's delivery does: a bot row in the chat, and the chat's streams woken."""
        chunk = RenderedChunk(text, text, "plain")
        await self.c.send(OutboundChunk(1, ThreadKey("web", chat, None), chunk, None))

    async def post(self, s: aiohttp.ClientSession, event_id: str, text: str, **headers: str) -> int:
        async with s.post(
            self.url("api/messages"), json={"event_id": event_id, "text": text}, headers=headers
        ) as r:
            await r.read()
            return r.status


async def _env(tmp_path: Path, *, console: bool, console_users: bool = True) -> AsyncIterator[Env]:
    db: Database = await open_database(tmp_path / "talon.db")
    settings = WebChannel(
        name="web", type="web", sites=[WebSite(token=TOKEN, origins=[SITE])], console_users=console_users
    )
    connector = WebConnector(settings, files_dir=tmp_path / "files", db=db, data_path=tmp_path)
    events: list[InboundEvent] = []

    async def intake(event: InboundEvent) -> IntakeResult:
        events.append(event)
        return IntakeResult(IntakeStatus.ACCEPTED, thread_id=1)

    await connector.start(intake)
    app = web.Application()
    auth = ConsoleAuth(ConsoleSettings(), db, secure=False) if console else None
    if auth is not None:
        app[CONSOLE_AUTH] = auth
    connector.install(app)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield Env(connector, server, auth, events)
    finally:
        await connector.stop()
        await server.close()
        await db.close()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async for e in _env(tmp_path, console=True):
        yield e


async def test_a_signed_in_user_chats_as_themselves_with_the_sessions_csrf_token(env: Env) -> None:
    browser, _ = env.signed_in("Alice")
    async with browser:
        status, me = await env.hello(browser)  # the page's first call: a same-origin POST
        assert status == 200 and me["user"] == "Alice" and len(me["csrf"]) > 20
        assert env.cookies_set == []  # no visitor cookie is made for a signed-in user
        assert await env.post(browser, "event-000001", "hi", Origin=env.own) == 403  # no token
        assert (
            await env.post(browser, "event-000002", "hi", Origin=env.own, **{"X-CSRF-Token": "x" * 43}) == 403
        )
        assert env.events == []
        assert (
            await env.post(browser, "event-000003", "hello", Origin=env.own, **{"X-CSRF-Token": me["csrf"]})
            == 200
        )
        async with browser.get(env.url("api/events?after=0")) as stream:
            shown = await read_events(stream, 1)
    [event] = env.events
    assert (event.sender.id, event.sender.display_name) == ("Alice", "Alice")
    assert event.thread_key.chat_id == "user.alice"
    assert [(m["role"], m["body"]) for m in shown] == [("user", "hello")]


async def test_a_listed_sites_page_cannot_use_the_operators_session(env: Env) -> None:
    browser, _ = env.signed_in("Alice")
    async with browser:
        status, body = await env.hello(browser, Origin=SITE)  # no site token: refused
        assert status == 403 and "user" not in body
        status, body = await env.hello(browser, Origin=SITE, **{"X-Talon-Site": TOKEN})
        assert status == 200 and "user" not in body and "csrf" not in body  # a visitor, not Alice
        status, me = await env.hello(browser)
        sent = await env.post(browser, "event-000004", "hi", Origin=SITE, **{"X-CSRF-Token": me["csrf"]})
        assert sent == 403  # the session does not count from the site: it needs the site token
    assert env.events == []


async def test_nobody_signed_in_is_sent_to_sign_in_and_nothing_is_stored(env: Env) -> None:
    async with aiohttp.ClientSession() as browser:
        status, body = await env.hello(browser)
        assert status == 401
        assert body["sign_in"] == "/console/login?next=%2Fchat%2Fweb%2F"
        assert await env.post(browser, "event-000005", "hi", Origin=env.own) == 401
        async with browser.get(env.url("api/events")) as stream:
            assert stream.status == 401
    assert env.events == []


async def test_signing_out_ends_the_users_event_stream(env: Env) -> None:
    browser, token = env.signed_in("Alice")
    async with browser:
        _, me = await env.hello(browser)
        assert (
            await env.post(browser, "event-000006", "one", Origin=env.own, **{"X-CSRF-Token": me["csrf"]})
            == 200
        )
        async with browser.get(env.url("api/events?after=0")) as stream:
            await read_events(stream, 1)
            assert env.auth is not None
            env.auth.sessions.close(token)
            assert (
                await env.post(browser, "event-000007", "two", Origin=env.own, **{"X-CSRF-Token": me["csrf"]})
                == 401
            )
            # The stream wakes for nothing new; it ends at its next wake-up (here: a bot message).
            await env.bot_says("user.alice", "still there?")
            async with asyncio.timeout(5):
                rest = await stream.content.read()
            assert b"still there?" not in rest


async def test_with_console_users_off_the_page_needs_a_site_token(tmp_path: Path) -> None:
    async for env in _env(tmp_path, console=True, console_users=False):
        browser, _ = env.signed_in("Alice")
        async with browser:
            status, body = await env.hello(browser)
            assert status == 403 and "sign_in" not in body
        assert env.events == []
