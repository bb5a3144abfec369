"""Budgets and model fallback as deployed: ``talon run`` as a subprocess with the Telegram
stand-in in its own process and the model stand-in answering 529 "overloaded" for a while.

The persona lists two models: the first overloaded call (retried once by the provider, as
configured) falls back to the second, and the user gets the answer; the next call goes to
the first model again. A daily budget of 1,000 tokens lets the second turn start (800 used)
and refuses the third politely without a model call. ``talon status`` shows the fallback,
``talon usage --by model`` the tokens and cost of each model, and the log stays clean.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deployed.support import deployed_daemon, fake_process, get_json, log_failures, post_json
from tests.e2e.daemon import talon
from tests.fakes.model_api import Error, FakeAnthropic, Reply

pytestmark = pytest.mark.timeout(180)

CHAT = 4343


async def _sent(bot_api: Any) -> list[str]:
    return list((await get_json(f"{bot_api.url}/_fake/sent")).get(str(CHAT), []))


async def _say(bot_api: Any, text: str) -> None:
    await post_json(
        f"{bot_api.url}/_fake/inject", {"messages": [{"chat_id": CHAT, "user_id": CHAT, "text": text}]}
    )


async def _until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


def _bot(root: Path, bot_api: Any, model: FakeAnthropic) -> Path:
    config = {
        "data_dir": "data",
        "providers": {
            "local": {"type": "anthropic", "base_url": model.base_url, "api_key": "none", "max_retries": 1}
        },
        "channels": [
            {
                "name": "team-telegram",
                "type": "telegram",
                "token": bot_api.info["token"],
                "api_base_url": bot_api.url,
            }
        ],
        "bindings": [{"channel": "team-telegram", "persona": "assistant"}],
        "prices": {"local:big": {"input": 3.0, "output": 15.0}, "local:small": {"input": 1.0, "output": 5.0}},
        "budgets": {"per_user_day": {"tokens": 1000}},
    }
    (root / "talon.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    persona = root / "personas" / "assistant"
    persona.mkdir(parents=True)
    (persona / "persona.yaml").write_text(
        yaml.safe_dump({"model": ["local:big", "local:small"]}), encoding="utf-8"
    )
    (persona / "system.md").write_text("# Assistant\n\nYou help.\n", encoding="utf-8")
    return root / "talon.yaml"


async def test_an_overloaded_model_falls_back_and_a_spent_budget_refuses(tmp_path: Path) -> None:
    def answer(body: dict[str, Any]) -> Reply:
        return Reply(text=f"answered by {body['model']}", input_tokens=600, output_tokens=200)

    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path) as bot_api,
        FakeAnthropic(responder=answer) as model,
    ):
        config = _bot(tmp_path, bot_api, model)
        model.script(Error(529), Error(529))  # the first model's call and its one retry
        async with deployed_daemon(config) as daemon:
            await _say(bot_api, "hello")
            await _until(lambda: _has(bot_api, 1), 60, "the first answer")
            await _say(bot_api, "again")
            await _until(lambda: _has(bot_api, 2), 60, "the second answer")
            await _say(bot_api, "and a third time")
            await _until(lambda: _has(bot_api, 3), 60, "the refusal")
            status = await talon("status", "-c", str(config))
            usage = await talon("usage", "-c", str(config), "--by", "model")
            assert await daemon.stop() == 0
            log = daemon.log()
        sent = await _sent(bot_api)

    assert sent[:2] == ["answered by small", "answered by big"]
    assert "daily budget of 1,000 tokens" in sent[2] and "saved" in sent[2]
    assert [body["model"] for body in model.requests] == [
        "big",
        "big",
        "small",
        "big",
    ]  # no call for the third
    assert status[0] == 0 and "assistant: 1 runs answered by a fallback model" in status[1], status
    assert "local:small" in status[1]
    code, out, _ = usage
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    assert (
        code == 0 and rows["local:small"][1:4] == ["1", "600", "200"] and rows["local:small"][4] == "0.0016"
    )
    assert rows["local:big"][1:4] == ["1", "600", "200"] and rows["local:big"][4] == "0.0048"
    assert log_failures(log) == []


async def _has(bot_api: Any, n: int) -> bool:
    return len(await _sent(bot_api)) >= n
