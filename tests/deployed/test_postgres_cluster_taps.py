"""Questions in a cluster as deployed: two ``talon run`` nodes on one PostgreSQL database share
the turns of many chats whose persona asks a question. Every tap and every typed answer
reaches Telegram's poller, on the first node, yet resumes the turn waiting for it wherever that
turn runs, at once rather than when the question would time out (15 minutes).

The Bot API stand-in and the asking model stand-in (:mod:`tests.fakes.asking_model`) run in
processes of their own, the Bot API slow. It does not refuse sends here: a prompt whose post
is refused is shown as numbered text instead (tests/unit/interactions), which has no buttons to tap.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from tests.deployed.support import fake_process, get_json, log_failures, post_json, telegram_node
from tests.e2e.daemon import Daemon, talon_env

pytestmark = pytest.mark.timeout(300)

CHATS = 24
FIRST_CHAT = 7000
ANSWERED = 'answered: {"action": "answer", "content": {"value": true}}'
POLLER_ROLE = "channel:team-telegram"


def _node(root: Path, name: str, bot_api: Any, model_url: str, workers: int) -> Path:
    database = {"url": "${TALON_DATABASE_URL}", "cluster": True, "node_id": name}
    config = telegram_node(root, bot_api, model_url, database)
    settings = yaml.safe_load(config.read_text())
    settings["providers"]["local"]["type"] = "anthropic"  # the asking stand-in speaks Anthropic's API
    settings["channels"][0]["streaming"] = "off"  # about the prompt and its answer, not previews
    settings["queue"] = {"workers": workers}
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    persona_file = root / "personas" / "assistant" / "persona.yaml"
    persona = yaml.safe_load(persona_file.read_text())
    persona["capabilities"] = ["chat.ask"]
    persona_file.write_text(yaml.safe_dump(persona), encoding="utf-8")
    return config


def _asked_on(url: str) -> Counter[str]:
    """Per node, the runs that asked a question (each interaction names its run)."""
    with psycopg.connect(url) as pg:
        rows = pg.execute(
            "SELECT runs.node_id, count(*) FROM interactions JOIN runs ON runs.id = interactions.run_id "
            "GROUP BY runs.node_id"
        ).fetchall()
    return Counter({str(node): int(n) for node, n in rows})


async def _until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := await check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)
    return value


async def test_taps_and_typed_answers_on_the_poller_resume_turns_waiting_on_either_node(
    tmp_path: Path, pg_server: Any
) -> None:
    url = pg_server.new_database()
    env = talon_env({"TALON_DATABASE_URL": url})
    chats = [FIRST_CHAT + c for c in range(CHATS)]
    counts = tmp_path / "counts.json"
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.02:0.1") as bot_api,
        fake_process("tests.fakes.asking_model", tmp_path, "--counts", str(counts)) as model,
    ):
        # The poller's node takes in every message and would run every turn itself while it
        # has a worker free; with one, the other node runs many of them.
        workers = {"n1": 1, "n2": 32}
        configs = {n: _node(tmp_path / n, n, bot_api, model.url, workers[n]) for n in workers}
        nodes = {n: Daemon(configs[n], env) for n in configs}
        async with nodes["n1"], nodes["n2"]:
            await nodes["n1"].start(tmp_path / "n1" / "data", ready_timeout=60)  # it migrates, then polls
            await nodes["n2"].start(tmp_path / "n2" / "data", ready_timeout=60)

            async def n2_waits() -> bool:
                return f"{POLLER_ROLE} runs on another node" in nodes["n2"].log()

            await _until(n2_waits, 30, "n2 to leave polling to n1")
            messages = [{"chat_id": c, "text": "ask", "user_id": c} for c in chats]
            await post_json(f"{bot_api.url}/_fake/inject", {"messages": messages})

            async def prompts() -> dict[int, int] | None:
                buttons = (await get_json(f"{bot_api.url}/_fake/callbacks"))["buttons"]
                shown = {
                    int(k.split(":")[0]): int(k.split(":")[1]) for k, labels in buttons.items() if labels
                }
                return shown if len(shown) == CHATS else None

            shown = await _until(prompts, 90, "every chat's prompt")
            asked_on = _asked_on(url)
            answered_at = time.monotonic()
            for i, chat in enumerate(chats):  # half tap Yes, half type it
                if i % 2:
                    tap = {"chat_id": chat, "message_id": shown[chat], "label": "Yes", "user_id": chat}
                    await post_json(f"{bot_api.url}/_fake/tap", tap)
                else:
                    reply = {"chat_id": chat, "text": "yes", "user_id": chat}
                    await post_json(f"{bot_api.url}/_fake/inject", {"messages": [reply]})

            async def replied() -> dict[str, list[str]] | None:
                sent = await get_json(f"{bot_api.url}/_fake/sent")
                done = all(ANSWERED in sent.get(str(chat), []) for chat in chats)
                return sent if done else None

            await _until(replied, 60, "every turn to resume with its answer")
            resumed_in = time.monotonic() - answered_at
            await asyncio.sleep(1.0)  # nothing more arrives
            sent = await get_json(f"{bot_api.url}/_fake/sent")
            logs = {n: nodes[n].log() for n in nodes}
            for n in nodes:
                assert await nodes[n].stop() == 0

    # The cross-node path was taken: the poller's node got every answer, and some of the
    # questions were asked by turns on the other node.
    assert asked_on["n1"] > 0 and asked_on["n2"] > 0, asked_on
    assert sum(asked_on.values()) == CHATS, asked_on
    assert resumed_in < 60
    for chat in chats:
        replies = [t for t in sent[str(chat)] if not t.startswith("❓")]
        assert replies == [ANSWERED], (chat, sent[str(chat)])
    calls = json.loads(counts.read_text())
    assert calls == {"ask": CHATS, "resumed": CHATS}, calls  # each turn asked once, resumed once
    for n, text in logs.items():
        assert not log_failures(text), n
        assert "expired unanswered" not in text, n
