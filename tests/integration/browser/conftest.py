"""A real bridge whose persona holds browser.use, pages on 127.0.0.1, and the browser's manager."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.host_tools.conftest import BridgeEnv, make_bridge_env
from tests.unit.tools.browser.pages import Pages, StubResolver, serve_pages
from tools.bridge import CallResult, RunIdentity
from tools.browser.chromium import find_chromium
from tools.browser.manager import BrowserManager, close_browser, manager_for

pytestmark = pytest.mark.skipif(find_chromium(None) is None, reason="no Chromium installed")

RESOLVER_ANSWERS = {
    "metadata.test": "169.254.169.254",
    "intranet.test": "10.1.2.3",
    "example.test": "93.184.215.14",
}


@dataclass
class BrowserEnv:
    env: BridgeEnv
    pages: Pages
    identity: RunIdentity
    manager: BrowserManager
    resolver: StubResolver

    async def call(self, tool: str, args: dict[str, Any] | None = None) -> CallResult:
        return await self.env.bridge.call(self.identity, tool, args or {})

    async def ok(self, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.call(tool, args)
        assert not result.is_error, result.content
        return json.loads(result.content)

    async def error(self, tool: str, args: dict[str, Any] | None = None) -> str:
        result = await self.call(tool, args)
        assert result.is_error, result.content
        return result.content


MakeEnv = Callable[..., Awaitable[BrowserEnv]]


@pytest.fixture
async def make_browser_env(tmp_path: Path) -> AsyncIterator[MakeEnv]:
    made: list[BrowserEnv] = []

    async def make(*, browser: dict[str, Any] | None = None, labels: list[str] | None = None) -> BrowserEnv:
        extra = {
            "net_http": {"allowed_private_hosts": ["127.0.0.1"]},
            "browser": {"idle_timeout_seconds": 60, **(browser or {})},
        }
        personas = {"assistant": {"capabilities": labels if labels is not None else ["browser.use"]}}
        env = await make_bridge_env(tmp_path, personas, extra=extra)
        pages_cm = serve_pages()
        pages = await pages_cm.__aenter__()
        resolver = StubResolver(RESOLVER_ANSWERS)
        manager = manager_for(env.settings)
        manager.resolve = resolver
        made_env = BrowserEnv(env, pages, env.register("assistant"), manager, resolver)
        made_env._pages_cm = pages_cm  # type: ignore[attr-defined]
        made.append(made_env)
        return made_env

    yield make
    for item in made:
        await close_browser(item.env.settings.data_path)
        await item._pages_cm.__aexit__(None, None, None)  # type: ignore[attr-defined]
        await item.env.close()


@pytest.fixture
async def browser_env(make_browser_env: MakeEnv) -> BrowserEnv:
    return await make_browser_env()
