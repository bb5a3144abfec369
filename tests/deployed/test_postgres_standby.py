"""A hot standby on PostgreSQL: two ``talon run`` nodes with one Telegram bot on one database;
the active one is killed with kill -9 mid-burst, the standby takes over (the bot's polling
moves with it) and every chat is answered, nothing sent twice, nothing left in the outbox."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.deployed.support import (
    fake_process,
    get_json,
    log_failures,
    outbox_rows,
    post_json,
    reported_unknown,
    telegram_node,
    unfinished_preview,
)
from tests.deployed.test_telegram_burst import _burst, answered
from tests.e2e.daemon import Daemon, talon_env

pytestmark = pytest.mark.timeout(420)

CHATS = 60
PER_CHAT = 5


def _node(root: Path, bot_api: Any, model_url: str) -> Path:
    return telegram_node(
        root, bot_api, model_url, {"url": "${TALON_DATABASE_URL}", "standby": True, "standby_poll": 0.5}
    )


async def test_the_standby_takes_over_after_kill_9_and_every_chat_is_answered_once(
    tmp_path: Path, pg_server: Any
) -> None:
    url = pg_server.new_database()
    env = talon_env({"TALON_DATABASE_URL": url})
    async with (
        fake_process(
            "tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.05:0.2", "--fail-rate", "0.02"
        ) as bot_api,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model,
    ):
        active = Daemon(_node(tmp_path / "a", bot_api, model.url), env)
        standby = Daemon(_node(tmp_path / "b", bot_api, model.url), env)
        async with active, standby:
            await active.start(tmp_path / "a" / "data", ready_timeout=60)
            taking_over = asyncio.create_task(standby.start(tmp_path / "b" / "data", ready_timeout=240))
            async with asyncio.timeout(60):
                while "this one takes over when it stops" not in standby.log():
                    await asyncio.sleep(0.1)
            assert not taking_over.done(), "the standby waits while the active node runs"

            await post_json(f"{bot_api.url}/_fake/inject", {"messages": _burst(CHATS, PER_CHAT)})
            async with asyncio.timeout(120):
                while sum(map(len, (await get_json(f"{bot_api.url}/_fake/sent")).values())) < 40:
                    await asyncio.sleep(0.05)
            await active.kill()
            await taking_over

            deadline = time.monotonic() + 300
            while True:
                rows = outbox_rows(tmp_path / "b" / "data", url)
                sent = await get_json(f"{bot_api.url}/_fake/sent")
                waiting = [
                    c
                    for c in range(CHATS)
                    if not answered(sent.get(str(1000 + c), []), f"chat {c} message {PER_CHAT - 1}")
                    and not reported_unknown(rows, 1000 + c, f"chat {c} message {PER_CHAT - 1}")
                ]
                pending = [r for r in rows if r["status"] in ("pending", "sending")]
                if not waiting and not pending:
                    break
                assert time.monotonic() < deadline, (
                    f"{len(waiting)} chats unanswered, {len(pending)} rows open"
                )
                await asyncio.sleep(0.5)
            assert await standby.stop() == 0
        messages = await get_json(f"{bot_api.url}/_fake/messages")
        shown = {chat: [m["text"] for m in ms if not m["deleted"]] for chat, ms in messages.items()}

    free_after = re.search(r"the database is free after ([\d.]+) s", standby.log())
    assert free_after, standby.log()[-2000:]
    rows = outbox_rows(tmp_path / "b" / "data", url)
    by_status = Counter(r["status"] for r in rows)
    assert set(by_status) <= {"sent", "unknown"}, by_status
    # A preview posted in the moment of the kill is unknown to the store (docs/streaming.md).
    delivered = Counter(
        (chat, text) for chat, texts in shown.items() for text in texts if not unfinished_preview(text)
    )
    doubled = [key for key, n in delivered.items() if n > 1]
    assert not doubled, f"sent twice: {doubled[:5]}"
    showing = sum(1 for r in rows if r["status"] == "sent" and r["format"] != "drop_preview")
    assert showing <= sum(delivered.values()) <= showing + by_status["unknown"]
    assert log_failures(standby.log()) == []
