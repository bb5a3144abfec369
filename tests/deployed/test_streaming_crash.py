"""kill -9 while a reply streams into a Telegram chat: after the restart the chat ends with
exactly one final reply, and the preview the killed daemon left is deleted (or marked as
interrupted with ``stale_preview: mark``, tested in process), never left looking like an answer.

``talon run`` runs as a subprocess; the Bot API stand-in and the model stand-in (streaming
one word every 0.15 s) run in processes of their own."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

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

pytestmark = pytest.mark.timeout(240)

DELETE_CHAT = 5101
QUESTION = "please tell me " + " ".join(f"w{i}" for i in range(24))
FINAL = f"echo: {QUESTION}"


async def messages(url: str, chat: int) -> list[dict[str, Any]]:
    return (await get_json(f"{url}/_fake/messages")).get(str(chat), [])


async def until(check: Any, timeout: float, what: str) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.1)


def previews(data_dir: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{data_dir / 'talon.db'}?mode=ro", uri=True)
    try:
        return [(r[0], r[1]) for r in conn.execute("SELECT chat_id, state FROM stream_previews ORDER BY id")]
    finally:
        conn.close()


async def run_crash(tmp_path: Path, chat: int, stale_preview: str) -> list[dict[str, Any]]:
    root = tmp_path / stale_preview
    root.mkdir()
    async with (
        fake_process("tests.fakes.telegram_api.standalone", root, "--latency", "0.01:0.05") as bot_api,
        fake_process("tests.fakes.model_api", root, "--kind", "openai", "--chunk-delay", "0.15") as model,
    ):
        channel = {
            "name": "team-telegram",
            "type": "telegram",
            "token": bot_api.info["token"],
            "api_base_url": bot_api.url,
            "stale_preview": stale_preview,
        }
        config = write_deployed_config(root, model_url=model.url, channels=[channel])
        async with deployed_daemon(config) as daemon:
            await post_json(
                f"{bot_api.url}/_fake/inject",
                {"messages": [{"chat_id": chat, "text": QUESTION, "user_id": chat}]},
            )

            async def previewing() -> bool:
                shown = await messages(bot_api.url, chat)
                return bool(shown) and shown[0]["edits"] >= 1

            await until(previewing, 60, "a preview being edited")
            await daemon.kill()
        [left] = await messages(bot_api.url, chat)
        assert left["text"].endswith("writing…") and not left["deleted"]  # mid-stream at the kill
        async with deployed_daemon(config) as daemon:

            async def answered() -> bool:
                return any(m["text"] == FINAL and not m["deleted"] for m in await messages(bot_api.url, chat))

            await until(answered, 90, "the final reply after the restart")
            await asyncio.sleep(1.5)  # anything more would arrive now
            log = daemon.log()
        assert not log_failures(log), log_failures(log)[:3]
        assert all(state != "open" for _, state in previews(root / "data")), (
            previews(root / "data"),
            await messages(bot_api.url, chat),
        )
        sent_rows = [r for r in outbox_rows(root / "data") if r["chat_id"] == str(chat)]
        assert [r["status"] for r in sent_rows] == ["sent"]  # one reply, one row, delivered once
        return await messages(bot_api.url, chat)


async def test_kill_9_mid_stream_deletes_the_stale_preview_and_the_chat_gets_one_final_reply(
    tmp_path: Path,
) -> None:
    shown = await run_crash(tmp_path, DELETE_CHAT, "delete")
    stale, *rest = shown
    assert stale["deleted"]
    assert [m["text"] for m in rest if not m["deleted"]] == [FINAL]
