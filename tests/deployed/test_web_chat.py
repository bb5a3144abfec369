"""The web chat in a real browser against ``talon run``: Debian's Chromium through Playwright
(never ``playwright install``), the widget embedded in a page of another origin on 127.0.0.1.

A visitor types, watches the streamed preview become the final rendering, and hostile Markdown
stays inert; a wrong token or origin is refused; and across a kill -9 of the daemon mid-reply
(the page reconnecting on its own, a message posted while the daemon is down) every message
and every reply shows exactly once.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from tests.deployed.support import (
    add_console_user,
    deployed_daemon,
    fake_process,
    free_port,
    log_failures,
    sign_in,
    write_deployed_config,
)
from tools.browser.chromium import CONFINED_ARGUMENTS, find_chromium

CHROMIUM = find_chromium(None)
pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium)"),
]

TOKEN = "widget-token-0123456789abcdef"
HOSTILE = (
    '**bold** <script>window.pwned=1</script> <img src=x onerror="window.pwned=1"> '
    "[click](javascript:window.pwned=1) [site](https://example.com)"
)


@asynccontextmanager
async def host_page(talon: str, token: str) -> AsyncIterator[str]:
    """A site on another origin that embeds the chat (its own server on 127.0.0.1)."""
    html = (
        "<!doctype html><html><body><h1>Shop</h1><div id='chat' style='height:500px'></div>"
        f"<script src='{talon}/chat/web/chat.js' data-token='{token}' data-mount='#chat'></script>"
        "</body></html>"
    )

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=html, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=CHROMIUM,
            args=list(CONFINED_ARGUMENTS),
            chromium_sandbox=os.geteuid() != 0,
            # Pages on 127.0.0.1 go direct; anything else (Chromium's own traffic) to a closed port.
            proxy={"server": "http://127.0.0.1:9", "bypass": "127.0.0.1"},
            headless=True,
        )
        try:
            yield browser
        finally:
            await browser.close()


def config_for(root: Path, model_url: str, port: int, origins: list[str]) -> Path:
    channel = {"name": "web", "type": "web", "sites": [{"token": TOKEN, "origins": origins}]}
    return write_deployed_config(
        root, model_url=model_url, channels=[channel], http={"listen": f"127.0.0.1:{port}"}
    )


def query(data_dir: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{data_dir / 'talon.db'}?mode=ro", uri=True)
    try:
        return list(conn.execute(sql))
    finally:
        conn.close()


def stored(data_dir: Path) -> list[tuple[str, str, int]]:
    return query(data_dir, "SELECT role, body, deleted FROM web_messages ORDER BY id")


async def bot_messages(page: Any) -> list[dict[str, str]]:
    return await page.eval_on_selector_all(
        ".talon-msg.bot",
        "els => els.map(e => ({id: e.dataset.id, format: e.dataset.format, text: e.textContent, html: e.innerHTML}))",
    )


async def test_a_streamed_reply_becomes_its_sanitized_rendering(tmp_path: Path) -> None:
    port = free_port()
    talon = f"http://127.0.0.1:{port}"
    async with (
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai", "--chunk-delay", "0.1") as model,
        host_page(talon, TOKEN) as site,
        chromium() as browser,
    ):
        config = config_for(tmp_path, model.url, port, [site])
        async with deployed_daemon(config) as daemon:
            page = await browser.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda d: dialogs.append(d.message))
            await page.goto(site)
            await page.fill(".talon-form textarea", HOSTILE)
            await page.press(".talon-form textarea", "Enter")
            preview = page.locator(".talon-msg.bot[data-format='plain']")
            await preview.first.wait_for(timeout=30_000)  # the preview, while the model writes
            preview_id = await preview.first.get_attribute("data-id")
            assert "writing…" in (await preview.first.text_content() or "")
            final = page.locator(f".talon-msg.bot[data-id='{preview_id}'][data-format='html']")
            await final.wait_for(timeout=60_000)  # the same message, now the final rendering
            assert await final.locator("strong").text_content() == "bold"
            assert await final.locator("a[href='https://example.com']").count() == 1
            assert await page.locator(".talon-log script, .talon-log img, .talon-log [onerror]").count() == 0
            assert await page.locator(".talon-log a[href^='javascript']").count() == 0
            assert "<script>" in (await final.text_content() or "")  # shown as text, not run
            await page.wait_for_timeout(300)
            assert await page.evaluate("window.pwned") is None and dialogs == []
            assert [m["id"] for m in await bot_messages(page)] == [preview_id]
            assert await page.locator(".talon-msg.user").count() == 1
            await daemon.stop()
        assert not log_failures(daemon.log())
        assert TOKEN not in daemon.log()


async def test_a_wrong_token_or_origin_is_refused(tmp_path: Path) -> None:
    port = free_port()
    talon = f"http://127.0.0.1:{port}"
    async with (
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model,
        host_page(talon, TOKEN) as unlisted,
        host_page(talon, "not-the-widget-token-at-all") as wrong_token,
        chromium() as browser,
    ):
        config = config_for(tmp_path, model.url, port, ["https://shop.example", wrong_token])
        async with deployed_daemon(config):
            for site, why in ((unlisted, "may not use it"), (wrong_token, "unknown site token")):
                page = await browser.new_page()
                await page.goto(site)
                await page.locator(".talon-status", has_text=why).wait_for(timeout=20_000)
                await page.fill(".talon-form textarea", "let me in")
                await page.press(".talon-form textarea", "Enter")
                await page.wait_for_timeout(500)
                assert await page.locator(".talon-msg.bot").count() == 0
            assert stored(tmp_path / "data") == []


async def test_kill_9_mid_reply_and_reconnects_lose_and_double_nothing(tmp_path: Path) -> None:
    port = free_port()
    talon = f"http://127.0.0.1:{port}"
    question = "tell me " + " ".join(f"w{i}" for i in range(30))
    async with (
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai", "--chunk-delay", "0.15") as model,
        host_page(talon, TOKEN) as site,
        chromium() as browser,
    ):
        config = config_for(tmp_path, model.url, port, [site])
        page = await browser.new_page()
        async with deployed_daemon(config) as daemon:
            await page.goto(site)
            await page.fill(".talon-form textarea", question)
            await page.press(".talon-form textarea", "Enter")
            await page.locator(".talon-msg.bot[data-format='plain']").first.wait_for(timeout=30_000)
            await daemon.kill()  # mid-reply: the preview is showing "writing…"
        await page.locator(".talon-status", has_text="reconnecting").wait_for(timeout=20_000)
        # Posted while the daemon is down: the page retries with the same event id until it is back.
        await page.fill(".talon-form textarea", "and a second question")
        await page.press(".talon-form textarea", "Enter")
        await asyncio.sleep(1.0)
        async with deployed_daemon(config) as daemon:
            final = page.locator(".talon-msg.bot[data-format='html']", has_text="and a second question")
            await final.wait_for(timeout=90_000)
            first = page.locator(".talon-msg.bot[data-format='html']", has_text="w29")
            await first.wait_for(timeout=60_000)
            await page.wait_for_timeout(1500)  # anything doubled or left behind would show by now
            shown = await bot_messages(page)
            assert [m["format"] for m in shown] == ["html", "html"], shown
            assert sum("w29" in m["text"] for m in shown) == 1
            users = await page.locator(".talon-msg.user:not(.pending)").all_text_contents()
            assert users == [question, "and a second question"]

            await page.reload()  # a fresh page gets the same history, once
            await page.locator(".talon-msg.bot").nth(1).wait_for(timeout=20_000)
            await page.wait_for_timeout(500)
            assert [m["text"] for m in await bot_messages(page)] == [m["text"] for m in shown]
            assert await page.locator(".talon-msg.user").all_text_contents() == users
            await daemon.stop()
        live = [(role, body) for role, body, deleted in stored(tmp_path / "data") if not deleted]
        # Two questions, two answers, each once; the second question may be stored before the first
        # answer, since it was posted while that answer's turn was being retried.
        assert sorted(role for role, _ in live) == ["bot", "bot", "user", "user"]
        answers = [body for role, body in live if role == "bot"]
        assert sum("w29" in b for b in answers) == 1 and sum("second question" in b for b in answers) == 1


async def test_a_console_user_signs_in_and_chats_as_themselves(tmp_path: Path) -> None:
    port = free_port()
    talon = f"http://127.0.0.1:{port}"
    async with (
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai", "--chunk-delay", "0.1") as model,
        chromium() as browser,
    ):
        config = config_for(tmp_path, model.url, port, ["https://shop.example"])
        raw = yaml.safe_load(config.read_text())
        del raw["channels"][0]["sites"]  # no sites: a chat for console users only
        raw["console"] = {"users": [await add_console_user(config, "Ada", "viewer")]}
        config.write_text(yaml.safe_dump(raw))
        async with deployed_daemon(config) as daemon:
            page = await browser.new_page()
            await page.goto(f"{talon}/chat/web/")
            await page.locator(".talon-status", has_text="sign in to chat").wait_for(timeout=20_000)
            await page.click(".talon-status a.talon-sign-in")
            await sign_in(page, f"{talon}/chat/web/", "Ada")  # and back to the chat
            await page.locator(".talon-status", has_text="signed in as Ada").wait_for(timeout=20_000)
            await page.fill(".talon-form textarea", "hello from the console")
            await page.press(".talon-form textarea", "Enter")
            preview = page.locator(".talon-msg.bot[data-format='plain']")
            await preview.first.wait_for(timeout=30_000)  # streamed while the model writes
            preview_id = await preview.first.get_attribute("data-id")
            final = page.locator(f".talon-msg.bot[data-id='{preview_id}'][data-format='html']")
            await final.wait_for(timeout=60_000)
            assert "hello from the console" in (await final.text_content() or "")
            await page.locator(".talon-stop").click()  # /stop, with nothing running, is answered
            await page.locator(".talon-msg.bot").nth(1).wait_for(timeout=30_000)
            await page.goto(f"{talon}/console/")  # every console page links to the chat
            await page.click("header nav a[href='/chat/web/']")
            await page.locator(".talon-msg.user", has_text="hello from the console").wait_for(timeout=20_000)

            await page.context.clear_cookies()  # signed out: the page cannot post as Ada any more
            await page.fill(".talon-form textarea", "still me?")
            await page.press(".talon-form textarea", "Enter")
            await page.locator(".talon-status", has_text="sign in to chat").wait_for(timeout=20_000)
            await daemon.stop()
        assert not log_failures(daemon.log())
    chats = {chat for (chat,) in query(tmp_path / "data", "SELECT DISTINCT chat_id FROM web_messages")}
    assert chats == {"user.ada"}
    senders = query(tmp_path / "data", "SELECT DISTINCT sender_id FROM messages WHERE role = 'user'")
    assert senders == [("Ada",)]
    assert ("still me?",) not in query(tmp_path / "data", "SELECT body FROM web_messages")
