"""``talon doctor`` on the browser: where Chromium is, or how to install it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.daemon import talon
from tests.fakes.model_api import FakeOpenAI
from tests.harness import provider_for, write_config
from tools.browser.chromium import find_chromium


async def test_doctor_says_how_to_install_chromium_when_the_browser_is_missing(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake, "openai"),
            personas={"assistant": {"capabilities": ["browser.use"]}},
            extra={"browser": {"executable": str(tmp_path / "no-chromium")}},
        )
        code, out, _ = await talon("doctor", "-c", str(config))
    assert "browser" in out
    assert "is not an executable Chromium; install Chromium (Debian/Ubuntu: apt-get install chromium)" in out
    assert "the browser tools are not offered until then (browser.use: assistant)" in out
    assert code == 0  # a warning: the rest of the daemon works


@pytest.mark.skipif(find_chromium(None) is None, reason="no Chromium installed")
async def test_doctor_names_the_chromium_it_found(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake, "openai"),
            personas={"assistant": {"capabilities": ["browser.use"]}},
        )
        _, out, _ = await talon("doctor", "-c", str(config))
    assert f"Chromium at {find_chromium(None)} drives the browser tools (assistant)" in out
