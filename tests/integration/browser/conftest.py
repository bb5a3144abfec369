"""A real bridge whose persona holds browser.use, pages on 127.0.0.1, and the browser's manager.

Chromium and its driver take seconds to start on a busy machine, so the tests of a module
share one event loop, one bridge and one browser (:func:`shared`); each test gets a thread of
its own (:func:`browser_env`), whose session is closed after it. A test that needs other
browser settings gives the manager a copy of them (:meth:`BrowserEnv.configure`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.integration.host_tools.conftest import BridgeEnv, add_thread, make_bridge_env
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
class Shared:
    env: BridgeEnv
    pages: Pages
    manager: BrowserManager
    resolver: StubResolver
    threads: int = 0


@dataclass
class BrowserEnv:
    env: BridgeEnv
    pages: Pages
    identity: RunIdentity
    manager: BrowserManager
    resolver: StubResolver

    @property
    def workspace(self) -> Path:
        return (
            self.env.settings.data_path
            / "workspaces"
            / "assistant"
            / "threads"
            / str(self.identity.thread_id)
        )

    def page(self) -> Any:
        """The Playwright page of this thread's session (to make the page itself act)."""
        return self.manager._sessions[("assistant", self.identity.thread_id)].page

    def configure(self, **browser: Any) -> None:
        """Give the manager these browser settings (until :meth:`restore`)."""
        settings = self.manager.settings
        self.manager.settings = settings.model_copy(
            update={"browser": settings.browser.model_copy(update=browser)}
        )

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

    async def another_thread(self, chat: str) -> RunIdentity:
        thread_id = await add_thread(self.env.db, chat=chat)
        return self.env.bridge.register(5000 + thread_id, thread_id, "assistant")


async def make_shared(root: Path, labels: list[str], browser: dict[str, Any] | None = None) -> Shared:
    extra = {
        "net_http": {"allowed_private_hosts": ["127.0.0.1"]},
        "browser": {"idle_timeout_seconds": 60, **(browser or {})},
    }
    env = await make_bridge_env(root, {"assistant": {"capabilities": labels}}, extra=extra)
    manager = manager_for(env.settings)
    manager.resolve = StubResolver(RESOLVER_ANSWERS)
    return Shared(env, None, manager, manager.resolve)  # type: ignore[arg-type]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def shared(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Shared]:
    state = await make_shared(tmp_path_factory.mktemp("browser"), ["browser.use"])
    async with serve_pages() as pages:
        state.pages = pages
        yield state
        await close_browser(state.env.settings.data_path)
    await state.env.close()


@pytest_asyncio.fixture(loop_scope="module")
async def browser_env(shared: Shared) -> AsyncIterator[BrowserEnv]:
    shared.threads += 1
    thread_id = await add_thread(shared.env.db, chat=f"t{shared.threads}")
    identity = shared.env.bridge.register(1000 + thread_id, thread_id, "assistant")
    settings = shared.manager.settings
    shared.resolver.asked.clear()
    shared.pages.hits.clear()
    env = BrowserEnv(shared.env, shared.pages, identity, shared.manager, shared.resolver)
    yield env
    shared.manager.settings = settings
    for key in list(shared.manager._sessions):
        await shared.manager.close_session(key)
