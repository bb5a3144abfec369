"""kill -9 after image_generate made and posted its picture but before the turn committed:
after the restart the retried turn makes the same call, finds the picture its interrupted
attempt made, and the chat has it exactly once; the images endpoint was paid once.

``talon run`` as deployed; the Bot API, model and images stand-ins each in their own
process. The model stand-in answers ``draw PROMPT`` with an image_generate call and waits two
seconds before each answer, which holds the turn open after the post.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest
import yaml

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    get_json,
    log_failures,
    outbox_rows,
    post_json,
    write_deployed_config,
)

pytestmark = pytest.mark.timeout(150)

CHANNEL = "team-telegram"
CHAT = 3100


def _images(data_dir: Path) -> list[tuple[int, int]]:
    """(posted, run status) of each generated image."""
    conn = sqlite3.connect(f"file:{data_dir / 'talon.db'}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT g.posted, r.status FROM generated_images g JOIN runs r ON r.id = g.run_id ORDER BY g.id"
        ).fetchall()
    finally:
        conn.close()


async def test_kill_9_after_the_picture_was_posted_leaves_it_in_the_chat_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.05:0.15") as bot_api,
        fake_process(
            "tests.fakes.model_api", tmp_path, "--kind", "openai", "--draw", "--delay", "2"
        ) as model,
        fake_process("tests.fakes.images_api", tmp_path, "--latency", "0.3") as images,
    ):
        config = write_deployed_config(
            tmp_path,
            model_url=model.url,
            channels=[
                {
                    "name": CHANNEL,
                    "type": "telegram",
                    "token": bot_api.info["token"],
                    "api_base_url": bot_api.url,
                }
            ],
            images={"provider": "pictures"},
        )
        settings = yaml.safe_load(config.read_text())
        settings["providers"]["pictures"] = {
            "type": "openai",
            "base_url": images.info["base_url"],
            "api_key": images.info["api_key"],
        }
        config.write_text(yaml.safe_dump(settings))
        persona = tmp_path / "personas" / "assistant" / "persona.yaml"
        persona.write_text(yaml.safe_dump({"model": "local:test-model", "capabilities": ["image.generate"]}))
        ask = {"chat_id": CHAT, "user_id": CHAT, "text": "draw a harbour at night"}
        async with deployed_daemon(config) as daemon:
            await post_json(f"{bot_api.url}/_fake/inject", {"messages": [ask]})
            async with asyncio.timeout(40):
                # The picture is made and in the chat; the turn waits for its second model answer.
                while not (await get_json(f"{bot_api.url}/_fake/files")) or _images(data) != [(1, "running")]:
                    await asyncio.sleep(0.02)
            assert not [r for r in outbox_rows(data) if r["plain"] == "drawn"], "killed before the reply"
            await daemon.kill()

        async with deployed_daemon(config) as daemon:
            deadline = time.monotonic() + 60
            while not [r for r in outbox_rows(data) if r["plain"] == "drawn" and r["status"] == "sent"]:
                assert time.monotonic() < deadline, "the retried turn never answered"
                await asyncio.sleep(0.2)
            assert await daemon.stop() == 0
            log = daemon.log()
        files = await get_json(f"{bot_api.url}/_fake/files")
        paid = await get_json(f"{images.url}/_fake/requests")
    assert [(str(f["chat_id"]), f["name"].endswith(".png")) for f in files] == [(str(CHAT), True)], files
    assert [r["prompt"] for r in paid] == ["a harbour at night"], "the endpoint was called once"
    assert [posted for posted, _ in _images(data)] == [1]
    assert log_failures(log) == []
