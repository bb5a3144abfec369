"""The browser tools in a real turn: the fake model opens a page served on 127.0.0.1, clicks its
button, takes a screenshot and answers with what it saw; the screenshot reaches the model as an
image inside the tool result, and the daemon's stop closes Chromium."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_texts, write_config
from tests.unit.tools.browser.pages import serve_pages
from tools.browser import manager as browser_manager
from tools.browser.chromium import find_chromium

pytestmark = pytest.mark.skipif(find_chromium(None) is None, reason="no Chromium installed")


async def test_the_model_opens_a_page_clicks_and_sees_the_screenshot(tmp_path: Path) -> None:
    async with serve_pages() as pages:

        def respond(body: dict[str, Any]) -> Reply:
            results = tool_texts(body)
            if not results:
                return Reply(tool_calls=[Call("browser_open", {"url": pages.url("/")})])
            if len(results) == 1:
                target = {"kind": "semantic", "text": "Press me", "role": "button"}
                return Reply(tool_calls=[Call("browser_act", {"action": "click", "target": target})])
            if len(results) == 2:
                return Reply(tool_calls=[Call("browser_screenshot", {})])
            opened, clicked, shot = (json.loads(r) for r in results)
            return Reply(
                text=f"{opened['text'].splitlines()[0]} -> {clicked['text'].splitlines()[0]}; "
                f"{shot['width']}x{shot['height']} at {shot['path']}"
            )

        async with FakeAnthropic(responder=respond) as fake:
            config = write_config(
                tmp_path,
                provider=provider_for(fake),
                personas={"assistant": {"capabilities": ["browser.use"]}},
                extra={"net_http": {"allowed_private_hosts": ["127.0.0.1"]}},
            )
            async with running_gateway(config) as gw:
                turn = await say(gw, "press the button on my page", timeout=90)
                data_path = gw.settings.data_path
            offered = {t["name"] for t in fake.requests[0]["tools"]}
            last = fake.requests[-1]["messages"][-1]
    assert {
        "browser_open",
        "browser_observe",
        "browser_act",
        "browser_screenshot",
        "browser_close",
    } <= offered
    assert turn.text.startswith("Not clicked -> Clicked!; 1280x720 at /workspace/screenshots/shot-")
    [result] = [b for b in last["content"] if b["type"] == "tool_result"]
    assert [c["type"] for c in result["content"]] == ["text", "image"]
    shot_path = turn.text.rsplit(" at ", 1)[1]
    workspaces = list((data_path / "workspaces" / "assistant" / "threads").iterdir())
    assert (workspaces[0] / shot_path.removeprefix("/workspace/")).read_bytes()[:4] == b"\x89PNG"
    assert data_path not in browser_manager._MANAGERS  # the daemon's stop closed its browser
