"""A channel that could not start comes up later by itself, as deployed: ``talon run`` as a
subprocess, the Telegram Bot API stand-in in a process of its own that is not listening yet
at boot or answers 502 to its first calls. ``talon status`` shows the channel retrying (with
the last error), then connected; it answers messages. A rejected token stays failed with the
reason and is not tried again.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    get_json,
    log_failures,
    post_json,
    wait_for_answers,
    write_deployed_config,
)
from tests.deployed.test_telegram_burst import answered
from tests.e2e.daemon import talon
from tests.fakes.telegram_api.server import DEFAULT_TOKEN

pytestmark = pytest.mark.timeout(240)

# Short delays so a test sees several attempts; the defaults (2 s doubling to 300 s) suit a host.
RETRY = {"channel_retry": {"backoff_base": 1.0, "backoff_max": 2.0}}


def _telegram(url: str, token: str = DEFAULT_TOKEN) -> dict[str, str]:
    return {"name": "team-telegram", "type": "telegram", "token": token, "api_base_url": url}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _status_line(config: Path) -> str:
    code, out, err = await talon("status", "-c", str(config))
    assert code == 0, err
    return next(line.strip() for line in out.splitlines() if "channel team-telegram:" in line)


async def _status_until(config: Path, done: Callable[[str], bool], timeout: float) -> list[str]:
    """``talon status``'s line for the channel, polled until ``done``; every line seen."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while not seen or not done(seen[-1]):
        assert time.monotonic() < deadline, f"channel never got there; status said {seen}"
        seen.append(await _status_line(config))
    return seen


async def _ask_and_wait(bot_api: str, text: str) -> None:
    await post_json(
        f"{bot_api}/_fake/inject", {"messages": [{"chat_id": 1000, "user_id": 1000, "text": text}]}
    )
    await wait_for_answers(bot_api, {"1000": text}, answered, timeout=60)


async def test_a_bot_api_down_at_boot_is_retried_until_it_answers(tmp_path: Path) -> None:
    port = _free_port()
    async with fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model:
        config = write_deployed_config(
            tmp_path,
            model_url=model.url,
            channels=[_telegram(f"http://127.0.0.1:{port}")],
            # Two quick attempts per chunk: a notice sent while the channel is down must not
            # spend them, or it would fail long before the channel comes up.
            outbox={"max_attempts": 2, "backoff_base": 0.2, "backoff_max": 0.4},
            **RETRY,
        )
        async with deployed_daemon(config) as daemon:
            # Past "starting" (a status asked before the first attempt ended shows that).
            seen = await _status_until(config, lambda line: not line.endswith(": starting"), timeout=30)
            assert seen[-1].startswith("channel team-telegram: retrying in "), seen
            assert "last error: team-telegram: cannot reach the Telegram Bot API" in seen[-1]
            code, _, err = await talon(
                "send", "-c", str(config), "team-telegram", "sent while down", "--chat", "1000"
            )
            assert code == 0, err
            await asyncio.sleep(3)  # several of the channel's tries, and more than both chunk attempts
            async with fake_process(
                "tests.fakes.telegram_api.standalone", tmp_path, "--port", str(port), "--known-chat", "1000"
            ) as bot_api:
                await _status_until(config, lambda line: line.endswith(": connected"), timeout=30)
                await _ask_and_wait(bot_api.url, "hello once the network is up")
                sent = await get_json(f"{bot_api.url}/_fake/sent")
                assert sent["1000"].count("sent while down") == 1, sent
                assert await daemon.stop() == 0
        log = daemon.log()
    assert "trying again in" in log
    assert not log_failures(log)


async def test_502s_at_start_are_retried_and_the_channel_comes_up(tmp_path: Path) -> None:
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path, "--fail-first", "4") as bot_api,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model,
    ):
        config = write_deployed_config(
            tmp_path, model_url=model.url, channels=[_telegram(bot_api.url)], **RETRY
        )
        async with deployed_daemon(config) as daemon:
            seen = await _status_until(config, lambda line: line.endswith(": connected"), timeout=30)
            before = [line for line in seen[:-1] if not line.endswith(": starting")]
            assert before and all(
                line.startswith("channel team-telegram: retrying in ") for line in before
            ), seen
            assert "Bad Gateway" in before[0]
            await _ask_and_wait(bot_api.url, "hello after the 502s")
            stats = await get_json(f"{bot_api.url}/_fake/stats")
            assert stats["refused"] == {"502": 4}
            assert await daemon.stop() == 0
        assert not log_failures(daemon.log())


async def test_a_rejected_token_stays_failed_with_the_reason_and_is_not_retried(tmp_path: Path) -> None:
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path) as bot_api,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model,
    ):
        config = write_deployed_config(
            tmp_path, model_url=model.url, channels=[_telegram(bot_api.url, "7000001:not-the-token")], **RETRY
        )
        async with deployed_daemon(config) as daemon:
            line = await _status_line(config)
            assert line.startswith("channel team-telegram: failed — "), line
            assert "Telegram rejected the bot token (401 Unauthorized)" in line
            await asyncio.sleep(5)  # several retry delays
            assert await _status_line(config) == line
            stats = await get_json(f"{bot_api.url}/_fake/stats")
            assert stats["calls"].get("getme") == 1
            assert await daemon.stop() == 0
        log = daemon.log()
    assert "channel did not start and is not retried: team-telegram: Telegram rejected the bot token" in log
    assert "trying again" not in log
