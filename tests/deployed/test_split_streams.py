"""A model server that cuts its stream at every UTF-16 unit (surrogate pairs split between
deltas) and its socket writes inside UTF-8 characters: what users read, and what the
thread keeps, is exactly what the model wrote. The daemon, the Bot API stand-in and the
model stand-in each run in their own process."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    get_json,
    log_failures,
    post_json,
    write_deployed_config,
)

pytestmark = pytest.mark.timeout(180)

TEXT = "Grüße 😀 👨‍👩‍👧 🇯🇵 日本語のテキスト, e\u0301 and n\u0303, 𝄞 done"


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_every_split_of_a_reply_reaches_the_chat_exactly(tmp_path: Path, kind: str) -> None:
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.01:0.05") as bot_api,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", kind, "--split") as model,
    ):
        config = write_deployed_config(
            tmp_path,
            model_url=model.url,
            model_kind=kind,
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
            await post_json(
                f"{bot_api.url}/_fake/inject", {"messages": [{"chat_id": 7, "user_id": 7, "text": TEXT}]}
            )
            # A DM streams by default: wait for the preview to become the final reply.
            async with asyncio.timeout(60):
                while not (sent := (await get_json(f"{bot_api.url}/_fake/sent")).get("7")) or any(
                    t.endswith("writing…") for t in sent
                ):
                    await asyncio.sleep(0.1)
            assert await daemon.stop() == 0
    assert sent == [f"echo: {TEXT}"]
    conn = sqlite3.connect(tmp_path / "data" / "talon.db")
    try:
        stored = [t for (t,) in conn.execute("SELECT text FROM messages WHERE role = 'assistant'")]
    finally:
        conn.close()
    assert stored == [f"echo: {TEXT}"]
    assert log_failures(daemon.log()) == []
