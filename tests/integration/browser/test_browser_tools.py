"""The browser tools through the real bridge, against pages served on 127.0.0.1.

Names that stand for private or metadata addresses are answered by a stub resolver and
refused by the guard before any connection: no packet goes to a non-loopback address.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from pathlib import Path

import pytest

from tests.integration.browser.conftest import BrowserEnv, make_shared
from tools.base import ToolContext, ToolError
from tools.browser.chromium import find_chromium
from tools.browser.manager import close_browser, warm_browser
from tools.browser.render import render_html
from tools.ssrf import EgressPolicy

pytestmark = [
    pytest.mark.skipif(find_chromium(None) is None, reason="no Chromium installed"),
    pytest.mark.asyncio(loop_scope="module"),
]


def by_role(observation: dict, role: str, name: str) -> dict:
    [found] = [e for e in observation["elements"] if e["role"] == role and e["name"] == name]
    return found


async def test_observe_lists_the_button_by_role_and_a_click_changes_the_text(browser_env: BrowserEnv) -> None:
    opened = await browser_env.ok("browser_open", {"url": browser_env.pages.url("/")})
    assert opened["status"] == 200 and opened["title"] == "Counter"
    assert "Not clicked" in opened["text"]
    button = by_role(opened, "button", "Press me")
    assert button["id"].startswith("el_") and len(button["id"]) == 9
    by_role(opened, "link", "The form")

    acted = await browser_env.ok(
        "browser_act", {"action": "click", "target": {"kind": "element_id", "element_id": button["id"]}}
    )
    assert acted["text"].startswith("Clicked!")
    again = await browser_env.ok("browser_observe")
    assert by_role(again, "button", "Press me")["id"] == button["id"]  # the same page, the same ids


async def test_fill_select_and_submit_a_form(browser_env: BrowserEnv) -> None:
    await browser_env.ok("browser_open", {"url": browser_env.pages.url("/form")})
    await browser_env.ok(
        "browser_act",
        {
            "action": "fill",
            "target": {"kind": "semantic", "text": "Email", "role": "textbox"},
            "value": "ada@example.org",
        },
    )
    await browser_env.ok(
        "browser_act",
        {"action": "select", "target": {"kind": "selector", "selector": "#size"}, "value": "Large"},
    )
    filled = await browser_env.ok(
        "browser_act",
        {"action": "fill", "target": {"kind": "semantic", "text": "Password"}, "value": "hunter2"},
    )
    assert "hunter2" not in json.dumps(filled)  # a password field's value is never shown
    done = await browser_env.ok(
        "browser_act", {"action": "click", "target": {"kind": "semantic", "text": "Send", "role": "button"}}
    )
    assert done["title"] == "Thanks"
    assert "Signed up ada@example.org (l)" in done["text"]


async def test_the_screenshot_is_a_png_of_the_viewport_in_the_workspace(browser_env: BrowserEnv) -> None:
    env = browser_env
    env.configure(viewport_width=800, viewport_height=600)
    await env.ok("browser_open", {"url": env.pages.url("/")})
    result = await env.call("browser_screenshot")
    assert not result.is_error, result.content
    shot = json.loads(result.content)
    assert (shot["width"], shot["height"]) == (800, 600)
    assert shot["path"].startswith("/workspace/screenshots/shot-") and shot["path"].endswith(".png")
    [image] = result.images
    data = base64.b64decode(image.data)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (800, 600)
    saved = env.workspace / shot["path"].removeprefix("/workspace/")
    assert saved.read_bytes() == data and shot["bytes"] == len(data)


async def test_requests_to_blocked_addresses_are_refused_before_any_connection(
    browser_env: BrowserEnv,
) -> None:
    opened = await browser_env.ok(
        "browser_open", {"url": browser_env.pages.url("/blocked"), "wait_for": "networkidle"}
    )
    blocked = {b["url"]: b for b in opened.get("blocked", [])}
    image = blocked["http://metadata.test/latest/meta-data/"]
    assert image["kind"] == "image" and "169.254.169.254, a cloud metadata address" in image["reason"]
    fetched = blocked["http://intranet.test/secret"]
    assert fetched["kind"] == "fetch" and "10.1.2.3, a private address" in fetched["reason"]
    assert set(browser_env.resolver.asked) >= {"metadata.test", "intranet.test"}
    # Nothing reached the proxy's connection step either: it answers only 127.0.0.1.
    assert all(hit.startswith("/") for hit in browser_env.pages.hits)


async def test_a_redirect_to_a_blocked_address_is_stopped_by_the_pinned_proxy(
    browser_env: BrowserEnv,
) -> None:
    opened = await browser_env.ok("browser_open", {"url": browser_env.pages.url("/redirect-out")})
    assert opened["status"] == 403
    assert "talon egress guard: blocked: metadata.test resolves to 169.254.169.254" in opened["text"]


async def test_a_blocked_url_is_refused_before_the_browser_loads_it(browser_env: BrowserEnv) -> None:
    message = await browser_env.error("browser_open", {"url": "http://metadata.test/latest/"})
    assert "blocked: metadata.test resolves to 169.254.169.254, a cloud metadata address" in message
    for url, words in (
        ("file:///etc/passwd", "absolute http(s) URL"),
        ("http://user:pw@127.0.0.1/", "credentials in the URL are not allowed"),
    ):
        assert words in await browser_env.error(
            "browser_open", {"url": url.replace("127.0.0.1", f"127.0.0.1:{browser_env.pages.port}")}
        )


async def test_a_redirect_loop_and_a_trickling_page_end_within_their_bounds(browser_env: BrowserEnv) -> None:
    message = await browser_env.error("browser_open", {"url": browser_env.pages.url("/loop")})
    assert "ERR_TOO_MANY_REDIRECTS" in message
    slow = await browser_env.ok("browser_open", {"url": browser_env.pages.url("/trickle"), "timeout_ms": 800})
    assert "not load within 800 ms" in slow["navigation"]


async def test_a_hung_page_and_a_huge_page_cost_a_bounded_observation(
    browser_env: BrowserEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    huge = await browser_env.ok("browser_open", {"url": browser_env.pages.url("/huge")})
    assert len(huge["elements"]) == 80 and huge["elementsTruncated"] is True
    monkeypatch.setattr("tools.browser.observe.OBSERVE_TIMEOUT", 1.0)
    await browser_env.ok("browser_open", {"url": browser_env.pages.url("/hang")})
    page = browser_env.page()
    await page.evaluate("() => { setTimeout(() => { while (true) {} }, 0); }")  # the page's script spins
    hung = await browser_env.error("browser_observe")
    assert "did not answer within 1 s" in hung and "call browser_open" in hung
    assert "call browser_open" in await browser_env.error("browser_observe")
    again = await browser_env.ok("browser_open", {"url": browser_env.pages.url("/")})
    assert again["title"] == "Counter"


async def test_a_download_lands_in_the_workspace_under_a_safe_name(browser_env: BrowserEnv) -> None:
    await browser_env.ok("browser_open", {"url": browser_env.pages.url("/")})
    page = browser_env.page()
    await page.evaluate(
        "url => { const a = document.createElement('a'); a.href = url; document.body.append(a); a.click(); }",
        browser_env.pages.url("/download"),
    )
    for _ in range(100):
        observed = await browser_env.ok("browser_observe")
        if observed.get("downloads"):
            break
        await asyncio.sleep(0.05)
    assert observed["downloads"] == [{"path": "/workspace/downloads/report.csv", "size": 8}]
    assert (browser_env.workspace / "downloads" / "report.csv").read_bytes() == b"a,b\n1,2\n"


async def test_bad_targets_and_missing_pages_get_errors_the_model_can_act_on(browser_env: BrowserEnv) -> None:
    assert "no page is open in this thread's browser; call browser_open" in await browser_env.error(
        "browser_observe"
    )
    assert "call browser_open" in await browser_env.error(
        "browser_act", {"action": "click", "target": {"kind": "semantic", "text": "x"}}
    )
    await browser_env.ok("browser_open", {"url": browser_env.pages.url("/")})
    unknown = await browser_env.error(
        "browser_act", {"action": "click", "target": {"kind": "element_id", "element_id": "el_abcdef"}}
    )
    assert "element el_abcdef is not on the page" in unknown and "call browser_observe" in unknown
    malformed = await browser_env.error(
        "browser_act", {"action": "click", "target": {"kind": "element_id", "element_id": "button-1"}}
    )
    assert "el_ and six hex characters" in malformed
    nothing = await browser_env.error(
        "browser_act",
        {"action": "click", "target": {"kind": "semantic", "text": "Delete everything", "role": "button"}},
    )
    assert "nothing on the page matches button 'Delete everything'" in nothing
    assert "fill needs value" in await browser_env.error(
        "browser_act", {"action": "fill", "target": {"kind": "selector", "selector": "#go"}}
    )
    schema = await browser_env.error(
        "browser_act", {"action": "teleport", "target": {"kind": "selector", "selector": "#go"}}
    )
    assert "invalid arguments for browser_act" in schema and "action" in schema
    closed = await browser_env.ok("browser_close")
    assert closed == {"closed": True}
    assert "call browser_open" in await browser_env.error("browser_observe")


async def test_an_idle_session_is_closed_and_the_thread_is_told_why(browser_env: BrowserEnv) -> None:
    browser_env.configure(idle_timeout_seconds=0.3)
    await browser_env.ok("browser_open", {"url": browser_env.pages.url("/")})
    await asyncio.sleep(0.5)
    message = await browser_env.error("browser_observe")
    assert "its browser session was closed after 0.3 s unused" in message
    assert not browser_env.manager._sessions


async def test_the_reaper_closes_idle_sessions_without_a_call(browser_env: BrowserEnv) -> None:
    reaper = browser_env.manager._reaper
    if reaper is not None:  # a reaper asleep on the old timeout; the next session starts a new one
        reaper.cancel()
    browser_env.configure(idle_timeout_seconds=0.2)
    await browser_env.ok("browser_open", {"url": browser_env.pages.url("/")})
    for _ in range(100):
        if not browser_env.manager._sessions:
            break
        await asyncio.sleep(0.05)
    assert not browser_env.manager._sessions


async def test_past_the_session_cap_the_least_recently_used_session_is_closed(
    browser_env: BrowserEnv,
) -> None:
    browser_env.configure(max_contexts=2)
    identities = [
        browser_env.identity,
        await browser_env.another_thread("b"),
        await browser_env.another_thread("c"),
    ]
    for identity in identities:
        result = await browser_env.env.bridge.call(
            identity, "browser_open", {"url": browser_env.pages.url("/")}
        )
        assert not result.is_error, result.content
    assert len(browser_env.manager._sessions) == 2
    first = await browser_env.env.bridge.call(identities[0], "browser_observe", {})
    assert first.is_error and "was closed to make room for another thread's" in first.content
    latest = await browser_env.env.bridge.call(identities[2], "browser_observe", {})
    assert not latest.is_error


async def test_past_the_tab_cap_a_popup_is_closed(browser_env: BrowserEnv) -> None:
    browser_env.configure(max_pages=1)
    await browser_env.ok("browser_open", {"url": browser_env.pages.url("/")})
    page = browser_env.page()
    await page.evaluate("url => window.open(url)", browser_env.pages.url("/form"))
    for _ in range(40):
        observed = await browser_env.ok("browser_observe")
        if observed.get("notes"):
            break
        await asyncio.sleep(0.05)
    assert any("was closed: browser.max_pages tabs are open" in n for n in observed["notes"])
    assert observed["title"] == "Counter"


async def test_without_the_label_the_tools_are_not_listed_and_a_direct_call_is_refused(
    tmp_path: Path,
) -> None:
    state = await make_shared(tmp_path, ["net.http:egress"])
    try:
        identity = state.env.register("assistant")
        assert not [t for t in state.env.bridge.tools_for(identity) if t.mcp_name.startswith("browser_")]
        result = await state.env.bridge.call(identity, "browser_open", {"url": "http://127.0.0.1:9/"})
        assert result.is_error and result.refused
        assert "browser_open needs the capability 'browser.use'" in result.content
        await warm_browser(state.env.settings, state.env.personas)  # the daemon's start
        assert state.manager.launches == 0
    finally:
        await close_browser(state.env.settings.data_path)
        await state.env.close()


async def test_without_chromium_the_tools_are_not_listed(tmp_path: Path) -> None:
    state = await make_shared(tmp_path, ["browser.use"], browser={"executable": str(tmp_path / "chromium")})
    try:
        identity = state.env.register("assistant")
        assert not [t for t in state.env.bridge.tools_for(identity) if t.mcp_name.startswith("browser_")]
        result = await state.env.bridge.call(identity, "browser_open", {"url": "http://127.0.0.1:9/"})
        assert result.is_error and "unknown tool 'browser_open'" in result.content
    finally:
        await close_browser(state.env.settings.data_path)
        await state.env.close()


async def test_render_html_renders_through_the_same_guard(browser_env: BrowserEnv) -> None:
    persona = browser_env.env.personas["assistant"]
    ctx = ToolContext(
        thread_id=browser_env.identity.thread_id,
        persona=persona,
        db=browser_env.env.db,
        settings=browser_env.env.settings,
    )
    html = await render_html(ctx, browser_env.pages.url("/"))
    assert html is not None and "Press me" in html and "<h1" in html
    with pytest.raises(ToolError) as refused:
        await render_html(ctx, browser_env.pages.url("/redirect-out"))
    assert "metadata.test resolves to 169.254.169.254" in str(refused.value)
    assert not browser_env.manager._sessions  # the render's own context is gone


async def wait_for_spare(browser_env: BrowserEnv, other_than: object = None) -> object:
    for _ in range(200):
        spare = browser_env.manager._spare
        if spare is not None and spare.context is not other_than:
            return spare.context
        await asyncio.sleep(0.05)
    raise AssertionError("no spare tab was made")


async def test_a_threads_first_open_takes_the_spare_tab_and_another_is_made(browser_env: BrowserEnv) -> None:
    await warm_browser(browser_env.env.settings, browser_env.env.personas)
    spare = await wait_for_spare(browser_env)
    opened = await browser_env.ok("browser_open", {"url": browser_env.pages.url("/")})
    assert opened["title"] == "Counter"
    session = browser_env.manager._sessions[("assistant", browser_env.identity.thread_id)]
    assert session.context is spare and len(spare.pages) == 1
    assert await wait_for_spare(browser_env, other_than=spare) is not spare


async def test_a_spare_made_under_another_policy_is_not_used(browser_env: BrowserEnv) -> None:
    await warm_browser(browser_env.env.settings, browser_env.env.personas)
    spare = await wait_for_spare(browser_env)
    narrower = EgressPolicy.build(["docs.example.test"], [])
    session = await browser_env.manager.session(("assistant", browser_env.identity.thread_id), narrower)
    assert session.context is not spare and session.guard.policy == narrower
    assert not spare.pages  # the unfitting spare was closed, not kept beside the new context
    opened = await browser_env.error("browser_open", {"url": browser_env.pages.url("/")})
    assert "127.0.0.1" in opened
