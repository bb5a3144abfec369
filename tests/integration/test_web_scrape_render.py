"""web_scrape renders a page whose body its scripts build in the daemon's confined Chromium, in a
context of its own that is closed afterwards, and extracts the rendered text."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config import NetHttpSettings, Settings
from gateway.personas import Persona
from tests.fakes.web_pages import ARTICLE_SENTENCES, NOISE, WebSite, article_html
from tools.base import ToolContext
from tools.browser.chromium import find_chromium
from tools.browser.manager import close_browser, manager_for
from tools.web import web_scrape

pytestmark = pytest.mark.skipif(find_chromium(None) is None, reason="no Chromium installed")


def _scripted_page() -> str:
    """A shell whose article arrives only when its script runs."""
    body = json.dumps(article_html().split("<body>", 1)[1].split("</body>", 1)[0])
    return (
        "<!doctype html><html><head><title>Tide Mills of Brittany</title></head><body><div id='root'></div>"
        f"<script>document.getElementById('root').innerHTML = {body};</script></body></html>"
    )


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[ToolContext]:
    (tmp_path / "data").mkdir()
    settings = Settings(
        config_dir=tmp_path,
        data_dir=Path("data"),
        net_http=NetHttpSettings(allowed_private_hosts=["127.0.0.1"]),
    )
    persona = Persona(
        name="assistant", provider="local", model="m", description=None,
        capabilities=("net.http:egress",), system_prompt="# Assistant", path=tmp_path,
    )  # fmt: skip
    try:
        yield ToolContext(thread_id=1, persona=persona, db=None, settings=settings)  # type: ignore[arg-type]
    finally:
        await close_browser(settings.data_path)


async def test_a_script_built_page_is_rendered_and_extracted(ctx: ToolContext) -> None:
    async with WebSite() as site:
        site.page("/app", _scripted_page())
        result = await web_scrape.TOOL.handler(ctx, {"url": site.url("/app")})
        hits = list(site.hits)
    assert result["rendered"] is True
    for sentence in ARTICLE_SENTENCES:
        assert sentence in result["content"]
    assert not any(noise in result["content"] for noise in NOISE)
    assert hits == ["/app", "/app"]  # the fetch, then the browser's load
    assert manager_for(ctx.settings)._sessions == {}  # the render's own context is closed
