"""``talon doctor``: the built-in defaults without a config, a warning for every open bot,
and ``--fix`` making the data dir owner-only."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.cli_support import init_bot as _init
from tests.e2e.cli_support import tree as _tree
from tests.e2e.daemon import talon
from tests.fakes.model_api import FakeOpenAI


@pytest.fixture
async def model_url() -> AsyncIterator[str]:
    """A model that answers the doctor's ping at once (a closed port is retried with backoff)."""
    async with FakeOpenAI() as fake:
        yield fake.base_url


async def test_doctor_without_a_config_reports_the_built_in_defaults_and_creates_nothing(
    tmp_path: Path,
) -> None:
    code, out, err = await talon("doctor", cwd=tmp_path)
    assert "talon.yaml valid" not in out
    assert "no talon.yaml here: checking the built-in defaults" in out
    assert "does not exist yet" in out and "--fix" in out
    assert "Traceback" not in err
    assert _tree(tmp_path) == []
    assert code == 1  # the built-in anthropic provider has no key here


async def _configure(bot: Path, channels: list[dict[str, Any]]) -> None:
    config = yaml.safe_load((bot / "talon.yaml").read_text())
    config["channels"] += channels
    (bot / "talon.yaml").write_text(yaml.safe_dump(config))


async def test_doctor_warns_for_every_open_channel(tmp_path: Path, model_url: str) -> None:
    bot = await _init(tmp_path, [f"OPENAI_BASE_URL={model_url}", "TALON_MODEL=local:x"])
    await _configure(
        bot,
        [
            {"name": "tg", "type": "telegram", "token": "123:abc"},
            {"name": "sl", "type": "slack", "bot_token": "xoxb-1", "app_token": "xapp-1"},
            {"name": "dc", "type": "discord", "token": "dc-token"},
            {"name": "closed", "type": "discord", "token": "dc-token-2", "allowed_users": ["42"]},
        ],
    )
    _, out, _ = await talon("doctor", "-c", str(bot / "talon.yaml"))
    warnings = [line for line in out.splitlines() if "anyone who can reach" in line]
    assert [w.split("(")[1].split(")")[0] for w in warnings] == ["tg", "sl", "dc"]
    assert "Slack bot" in warnings[1] and "Discord bot" in warnings[2]


async def test_doctor_fix_creates_the_data_dir_and_makes_it_owner_only(
    tmp_path: Path, model_url: str
) -> None:
    bot = await _init(tmp_path, [f"OPENAI_BASE_URL={model_url}", "TALON_MODEL=local:x"])
    config = str(bot / "talon.yaml")
    _, out, _ = await talon("doctor", "-c", config, "--fix")
    assert f"fixed created {bot / 'data'} (mode 700)" in out
    assert stat.S_IMODE((bot / "data").stat().st_mode) == 0o700

    assert (await talon("migrate", "-c", config))[0] == 0
    os.chmod(bot / "data", 0o755)
    os.chmod(bot / "data" / "talon.db", 0o644)
    _, out, _ = await talon("doctor", "-c", config)
    assert "mode 755, readable by others" in out and "mode 644, readable by others" in out
    assert stat.S_IMODE((bot / "data").stat().st_mode) == 0o755  # without --fix nothing changes
    _, out, _ = await talon("doctor", "-c", config, "--fix")
    assert "mode 755 -> 700" in out and "mode 644 -> 600" in out
    assert stat.S_IMODE((bot / "data").stat().st_mode) == 0o700
    assert stat.S_IMODE((bot / "data" / "talon.db").stat().st_mode) == 0o600
    _, out, _ = await talon("doctor", "-c", config)
    assert "writable and owner-only" in out


async def test_doctor_says_who_can_reach_the_http_server_and_use_its_pages(
    tmp_path: Path, model_url: str
) -> None:
    bot = await _init(tmp_path, [f"OPENAI_BASE_URL={model_url}", "TALON_MODEL=local:x"])
    await _configure(bot, [{"name": "web", "type": "web"}])  # no sites, no console users
    config = yaml.safe_load((bot / "talon.yaml").read_text())
    config["http"] = {"listen": "127.0.0.1:0"}
    (bot / "talon.yaml").write_text(yaml.safe_dump(config))
    _, out, _ = await talon("doctor", "-c", str(bot / "talon.yaml"))
    assert "http.listen 127.0.0.1:0: reachable from this machine only" in out
    assert "channels[1] (web): no sites and no console users, so nobody can open this chat" in out

    config["http"] = {"listen": "0.0.0.0:8787", "public_url": "http://talon.example.com"}
    (bot / "talon.yaml").write_text(yaml.safe_dump(config))
    _, out, _ = await talon("doctor", "-c", str(bot / "talon.yaml"))
    assert "http.listen 0.0.0.0:8787: reachable beyond this machine" in out
    assert "http.metrics_token: unset" in out
    assert "http.public_url http://talon.example.com: not https" in out
