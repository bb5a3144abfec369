"""Finding Chromium, the sandbox decision, and the environment Chromium and its driver get."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gateway.browser_settings import BrowserSettings
from gateway.config import Settings
from tools import registry
from tools.browser.chromium import (
    browser_available,
    browser_problem,
    chromium_environment,
    find_chromium,
    sandbox_enabled,
)


def test_a_configured_path_that_is_missing_means_no_browser(tmp_path: Path) -> None:
    settings = Settings(browser=BrowserSettings(executable=str(tmp_path / "no-chromium")))
    assert not browser_available(settings)
    problem = browser_problem(settings.browser)
    assert problem is not None and "is not an executable Chromium" in problem
    assert "apt-get install chromium" in problem


def test_a_configured_executable_file_is_used(tmp_path: Path) -> None:
    exe = tmp_path / "my-chromium"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    assert find_chromium(str(exe)) == str(exe)
    exe.chmod(0o644)
    assert find_chromium(str(exe)) is None


def test_without_config_the_candidates_are_looked_up_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = tmp_path / "chromium-headless-shell"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_chromium(None) == str(exe)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_chromium(None) is None
    problem = browser_problem(BrowserSettings())
    assert problem is not None and "no Chromium found on PATH" in problem


def test_the_sandbox_is_off_only_as_root_in_auto() -> None:
    assert sandbox_enabled(BrowserSettings(sandbox="on"))
    assert not sandbox_enabled(BrowserSettings(sandbox="off"))
    assert sandbox_enabled(BrowserSettings(sandbox="auto")) == (os.geteuid() != 0)


def test_chromium_gets_no_secret_from_the_daemon_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:tg-token-value")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-api-key-value")
    env = chromium_environment(tmp_path)
    assert not any("token-value" in v or "key-value" in v for v in env.values())
    assert env["HOME"] == str(tmp_path)


def test_the_browser_tools_are_in_the_registry_under_browser_use() -> None:
    names = [t.mcp_name for t in registry.tools_for(["browser.use"])]
    assert names == ["browser_open", "browser_observe", "browser_act", "browser_screenshot", "browser_close"]
    assert registry.packaged_instructions("browser.use") is not None
