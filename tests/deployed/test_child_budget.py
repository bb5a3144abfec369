"""Child agents against budgets as deployed: ``talon run`` as a subprocess with the Telegram
stand-in in its own process. A Telegram user's turn calls ``agent`` twice under a daily budget
of 1,000 tokens: the first child uses 1,600 tokens, so the second is refused with the polite
refusal before any model call of its own, and ``talon usage --by user`` counts the first
child for the user who asked."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deployed.support import deployed_daemon, fake_process, get_json, log_failures, post_json
from tests.e2e.daemon import talon
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import tool_results
from tests.integration.children.support import of, routed

pytestmark = pytest.mark.timeout(180)

CHAT = 4545


def _bot(root: Path, bot_api: Any, model: FakeAnthropic) -> Path:
    config = {
        "data_dir": "data",
        "providers": {"local": {"type": "anthropic", "base_url": model.base_url, "api_key": "none"}},
        "channels": [
            {
                "name": "team-telegram",
                "type": "telegram",
                "token": bot_api.info["token"],
                "api_base_url": bot_api.url,
                "streaming": "off",
            }
        ],
        "bindings": [{"channel": "team-telegram", "persona": "assistant"}],
        "prices": {"local:big": {"input": 3.0, "output": 15.0}},
        "budgets": {"per_user_day": {"tokens": 1000}},
    }
    (root / "talon.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    persona = root / "personas" / "assistant"
    persona.mkdir(parents=True)
    spec = {"model": "local:big", "capabilities": ["agent.dispatch"]}
    (persona / "persona.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    (persona / "system.md").write_text("# Assistant\n\nYou help.\n", encoding="utf-8")
    return root / "talon.yaml"


def _parent(body: dict[str, Any]) -> Reply:
    results = tool_results(body)
    if len(results) < 2:
        prompt = f"CHILD{len(results) + 1} look"
        return Reply(tool_calls=[Call("agent", {"prompt": prompt})], input_tokens=10, output_tokens=5)
    error, text = results[-1]
    return Reply(text=("refused: " if error else "ok: ") + text, input_tokens=10, output_tokens=5)


async def test_a_spent_budget_refuses_a_child_and_the_child_counts_for_the_user(tmp_path: Path) -> None:
    model = FakeAnthropic(
        responder=routed(
            go=_parent,
            CHILD1=lambda body: Reply(text="found it", input_tokens=1_500, output_tokens=100),
            CHILD2=lambda body: Reply(text="never asked"),
        )
    )
    async with fake_process("tests.fakes.telegram_api.standalone", tmp_path) as bot_api, model:
        config = _bot(tmp_path, bot_api, model)
        async with deployed_daemon(config) as daemon:
            await post_json(
                f"{bot_api.url}/_fake/inject",
                {"messages": [{"chat_id": CHAT, "user_id": CHAT, "text": "go"}]},
            )
            deadline = time.monotonic() + 60
            while not (sent := (await get_json(f"{bot_api.url}/_fake/sent")).get(str(CHAT))):
                assert time.monotonic() < deadline, "timed out waiting for the answer"
                await asyncio.sleep(0.2)
            usage = await talon("usage", "-c", str(config), "--by", "user")
            assert await daemon.stop() == 0
            log = daemon.log()

    assert len(sent) == 1 and sent[0].startswith("refused: ")
    assert "your daily budget of 1,000 tokens is used up today" in sent[0]
    assert len(of(model.requests, "CHILD1")) == 1 and of(model.requests, "CHILD2") == []
    code, out, _ = usage
    (row,) = [line.split() for line in out.splitlines()[2:] if str(CHAT) in line]
    # The parent's three calls (30 in, 15 out) and the first child's (1,500 in, 100 out),
    # priced at 3.00 in and 15.00 out per million.
    assert code == 0 and row[1:5] == ["2", "1,530", "115", "0.0063"], out
    assert log_failures(log) == []
