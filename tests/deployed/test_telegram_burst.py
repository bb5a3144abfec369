"""Telegram under a burst, as deployed: nothing lost, nothing doubled, logs that never fail.

``talon run`` runs with its default log level against a Bot API stand-in in another
process that answers every call after 50-200 ms and refuses 2 % of sends (429 flood
control, 502), and an OpenAI-compatible model server in a third process.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    get_json,
    log_failures,
    outbox_rows,
    post_json,
    write_deployed_config,
)

pytestmark = pytest.mark.timeout(420)

CHATS = 200
PER_CHAT = 10


def _burst(chats: int, per_chat: int, first_chat: int = 1000) -> list[dict[str, object]]:
    return [
        {"chat_id": first_chat + c, "user_id": first_chat + c, "text": f"chat {c} message {n}"}
        for n in range(per_chat)
        for c in range(chats)
    ]


def answered(texts: list[str], question: str) -> bool:
    """A reply echoes the last message of its turn; messages that arrived while the chat
    was busy are answered together, so the echo may quote several of them."""
    return any(t.startswith("echo: ") and question in t.removeprefix("echo: ").split("\n") for t in texts)


async def _wait_for_last_answers(
    bot_api: str, chats: range, last: int, timeout: float
) -> dict[str, list[str]]:
    deadline = time.monotonic() + timeout
    while True:
        sent = await get_json(f"{bot_api}/_fake/sent")
        missing = [
            c for c in chats if not answered(sent.get(str(c), []), f"chat {c - chats.start} message {last}")
        ]
        if not missing:
            return sent
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(missing)} chats never got their last answer, e.g. {missing[:5]}")
        await asyncio.sleep(0.5)


async def test_a_burst_over_200_chats_answers_every_chat_once(tmp_path: Path) -> None:
    async with (
        fake_process(
            "tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.05:0.2", "--fail-rate", "0.02"
        ) as bot_api,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model,
    ):
        config = write_deployed_config(
            tmp_path,
            model_url=model.url,
            channels=[
                {
                    "name": "team-telegram",
                    "type": "telegram",
                    "token": bot_api.info["token"],
                    "api_base_url": bot_api.url,
                }
            ],
        )
        async with deployed_daemon(config) as daemon:
            await post_json(f"{bot_api.url}/_fake/inject", {"messages": _burst(CHATS, PER_CHAT)})
            await _wait_for_last_answers(bot_api.url, range(1000, 1000 + CHATS), PER_CHAT - 1, 300)
            assert await daemon.stop() == 0
        # What each chat shows once the daemon is done: streamed previews that a turn's reply went
        # below (an earlier reply was still being sent) are deleted by the turn's last row.
        messages = await get_json(f"{bot_api.url}/_fake/messages")
        sent = {chat: [m["text"] for m in shown if not m["deleted"]] for chat, shown in messages.items()}
        stats = await get_json(f"{bot_api.url}/_fake/stats")
    assert sum(stats["refused"].values()) > 0, "the stand-in refused some sends"
    for chat, texts in sent.items():
        doubled = [t for t, n in Counter(texts).items() if n > 1]
        assert not doubled, f"chat {chat} got {doubled} more than once"
    rows = outbox_rows(tmp_path / "data")
    statuses = Counter(r["status"] for r in rows)
    assert set(statuses) == {"sent"}, statuses
    assert not any("writing…" in t for texts in sent.values() for t in texts), "a preview was left"
    shown = [r for r in rows if r["format"] != "drop_preview"]  # a dropped preview shows nothing
    assert sum(len(t) for t in sent.values()) == len(shown)
    assert log_failures(daemon.log()) == []
