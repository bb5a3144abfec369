"""``talon init`` in a terminal: the questions, the live checks against the local platform
fakes, and what lands in the folder; run again, it keeps what is there and adds what is new."""

from __future__ import annotations

import stat
from pathlib import Path

import pexpect
import yaml

from gateway.config import load_settings
from tests.e2e.daemon import TALON, talon, talon_env
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.model_api import FakeOpenAI
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_api.model import APP_TOKEN, BOT_TOKEN
from tests.fakes.telegram_api import DEFAULT_TOKEN, FakeTelegramAPI


def _spawn(bot: Path, *roots: str) -> pexpect.spawn:
    flags = dict(zip(("--telegram-api-url", "--slack-api-url", "--discord-api-url"), roots, strict=False))
    args = [*TALON[1:], "init", str(bot), *(x for pair in flags.items() for x in pair)]
    return pexpect.spawn(TALON[0], args, env=talon_env(), encoding="utf-8", timeout=30, dimensions=(40, 200))


async def _expect(child: pexpect.spawn, pattern: str) -> None:
    await child.expect(pattern, async_=True)


async def test_the_wizard_checks_each_answer_and_writes_a_working_folder(tmp_path: Path) -> None:
    bot = tmp_path / "bot"
    async with (
        FakeOpenAI() as model,
        FakeTelegramAPI() as telegram,
        FakeDiscord() as discord,
    ):
        model_url, discord_token = model.base_url, discord.token
        child = _spawn(bot, telegram.url, "http://127.0.0.1:9", discord.api_base_url)
        await _expect(child, r"provider \[1\]: ")
        child.sendline("2")
        await _expect(child, r"base URL \[http://127.0.0.1:11434/v1\]: ")
        child.sendline(model.base_url)
        await _expect(child, "answered")
        await _expect(child, r"model name \[.*\]: ")
        child.sendline("llama-test")
        await _expect(child, r"Add a Telegram bot\? \[y/N\]: ")
        child.sendline("y")
        await _expect(child, "Telegram bot token")
        child.sendline("123:wrong")
        await _expect(child, "Telegram refused the token")
        await _expect(child, "Telegram bot token")
        child.sendline(DEFAULT_TOKEN)
        await _expect(child, "ok: @talon_test_bot")
        await _expect(child, r"Add a Slack bot\? \[y/N\]: ")
        child.sendline("")
        await _expect(child, r"Add a Discord bot\? \[y/N\]: ")
        child.sendline("y")
        await _expect(child, "Discord bot token")
        child.sendline(discord.token)
        await _expect(child, "ok: talonbot")
        await _expect(child, "talon run -c")
        await child.expect(pexpect.EOF, async_=True)
        child.close()
        assert child.exitstatus == 0
    assert DEFAULT_TOKEN not in child.before  # typed without echo, never printed

    env = (bot / ".env").read_text()
    assert f"OPENAI_BASE_URL={model_url}" in env and "TALON_MODEL=local:llama-test" in env
    assert f"TELEGRAM_BOT_TOKEN={DEFAULT_TOKEN}" in env and f"DISCORD_BOT_TOKEN={discord_token}" in env
    assert "123:wrong" not in env
    assert stat.S_IMODE((bot / ".env").stat().st_mode) == 0o600
    assert (bot / ".gitignore").read_text().splitlines() == [".env", "data/"]
    settings = load_settings(bot / "talon.yaml")
    assert [c.name for c in settings.channels] == ["console", "telegram", "discord"]
    assert {(b.channel, b.persona) for b in settings.bindings} == {
        ("console", "assistant"),
        ("telegram", "assistant"),
        ("discord", "assistant"),
    }


async def test_running_it_again_keeps_what_is_there_and_adds_what_is_new(tmp_path: Path) -> None:
    bot = tmp_path / "bot"
    code, _, err = await talon(
        "init", str(bot), "--openai-base-url", "http://127.0.0.1:9/v1", "--model", "local:a"
    )
    assert code == 0, err
    (bot / "personas" / "assistant" / "system.md").write_text("# My own prompt\n")
    async with FakeSlack() as slack:
        child = _spawn(bot, "http://127.0.0.1:9", slack.base_url, "http://127.0.0.1:9")
        await _expect(child, "model: keeping local:a from .env")
        await _expect(child, r"Add a Telegram bot\? \[y/N\]: ")
        child.sendline("n")
        await _expect(child, r"Add a Slack bot\? \[y/N\]: ")
        child.sendline("y")
        await _expect(child, "Slack bot token")
        child.sendline(BOT_TOKEN)
        await _expect(child, "ok: talon in Fake Team")
        await _expect(child, "app-level token")
        child.sendline("not-an-app-token")
        await _expect(child, "starts with xapp-")
        child.sendline(APP_TOKEN)
        await _expect(child, r"Add a Discord bot\? \[y/N\]: ")
        child.sendline("")
        await child.expect(pexpect.EOF, async_=True)
        child.close()
        assert child.exitstatus == 0
    assert (bot / "personas" / "assistant" / "system.md").read_text() == "# My own prompt\n"
    env = (bot / ".env").read_text()
    assert "TALON_MODEL=local:a" in env and f"SLACK_APP_TOKEN={APP_TOKEN}" in env
    config = yaml.safe_load((bot / "talon.yaml").read_text())
    assert [c["name"] for c in config["channels"]] == ["console", "slack"]
    # With flags nothing is asked, even for what is new; --force overwrites.
    code, _, _ = await talon("init", str(bot), "--model", "local:b", "--force")
    assert code == 0 and "TALON_MODEL=local:b" in (bot / ".env").read_text()
    assert (bot / "personas" / "assistant" / "system.md").read_text() != "# My own prompt\n"


async def test_scripted_init_never_asks(tmp_path: Path) -> None:
    bot = tmp_path / "bot"
    code, _, err = await talon(
        "init", str(bot), "--anthropic-key", "sk-test-1", "--telegram-token", "1:x", "--no-input"
    )
    assert code == 0, err
    assert "ANTHROPIC_API_KEY=sk-test-1" in (bot / ".env").read_text()
    settings = load_settings(bot / "talon.yaml")
    assert [c.name for c in settings.channels] == ["console", "telegram"]
    code, _, err = await talon("init", str(bot), "--slack-bot-token", "xoxb-1")
    assert code == 2 and "--slack-app-token" in err
