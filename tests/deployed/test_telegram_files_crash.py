"""kill -9 while many files are being uploaded to Telegram: no file reaches a chat twice,
every file that was not on the wire at the kill arrives with its bytes, and those that were
are reported ``unknown`` rather than uploaded again.

``talon run`` as deployed; the Bot API stand-in in its own process answers every call after
100-300 ms and refuses 5 % of uploads (429, 502), which the outbox retries. The model
stand-in answers ``attach PATH ...`` with a channel_send carrying those attachments.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.deployed.files_crash import file_rows, make_files
from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    get_json,
    log_failures,
    outbox_rows,
    post_json,
    write_deployed_config,
)

pytestmark = pytest.mark.timeout(180)

CHANNEL = "team-telegram"
CHATS = 8
FILES_PER_CHAT = 8


async def test_kill_9_mid_upload_sends_no_file_twice_and_loses_none(tmp_path: Path) -> None:
    digests = make_files(tmp_path / "data", CHATS, FILES_PER_CHAT)
    async with (
        fake_process(
            "tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.1:0.3", "--fail-rate", "0.05"
        ) as bot_api,
        fake_process(
            "tests.fakes.model_api", tmp_path, "--kind", "openai", "--attach-channel", CHANNEL
        ) as model,
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
        )
        persona = tmp_path / "personas" / "assistant" / "persona.yaml"
        persona.write_text(
            yaml.safe_dump(
                {"model": "local:test-model", "capabilities": ["channel.send:*", "fs.read:persona"]}
            )
        )
        asks = [
            {
                "chat_id": 2000 + c,
                "user_id": 2000 + c,
                "text": "attach " + " ".join(f"/shared/c{c}-f{n}.bin" for n in range(FILES_PER_CHAT)),
            }
            for c in range(CHATS)
        ]
        async with deployed_daemon(config) as daemon:
            await post_json(f"{bot_api.url}/_fake/inject", {"messages": asks})
            async with asyncio.timeout(60):
                # Every turn committed (its reply row exists, so no turn runs again after the
                # kill), and uploads under way.
                while True:
                    replies = [r for r in outbox_rows(tmp_path / "data") if r["plain"] == "sent"]
                    uploaded = await get_json(f"{bot_api.url}/_fake/files")
                    if len(replies) == CHATS and len(uploaded) >= CHATS:
                        break
                    await asyncio.sleep(0.05)
            await daemon.kill()
        at_kill = file_rows(tmp_path / "data")
        in_flight = {(r["chat_id"], r["file_name"]) for r in at_kill if r["status"] == "sending"}

        async with deployed_daemon(config) as daemon:
            deadline = time.monotonic() + 60
            while any(r["status"] in ("pending", "sending") for r in outbox_rows(tmp_path / "data")):
                assert time.monotonic() < deadline, "the outbox never drained after the restart"
                await asyncio.sleep(0.3)
            assert await daemon.stop() == 0
            second_log = daemon.log()
        uploaded = await get_json(f"{bot_api.url}/_fake/files")

    rows = file_rows(tmp_path / "data")
    assert len(rows) == CHATS * FILES_PER_CHAT, "one outbox row per file"
    assert in_flight, "the kill caught some uploads on the wire (raise the latency if not)"
    assert len(at_kill) == len(rows), "every file was committed before the kill"
    by_status = Counter(r["status"] for r in rows)
    assert set(by_status) <= {"sent", "unknown"}, by_status
    unknown = {(r["chat_id"], r["file_name"]) for r in rows if r["status"] == "unknown"}
    assert unknown == in_flight, "exactly the uploads on the wire at the kill are unknown"

    arrived = Counter((f["chat_id"], f["name"]) for f in uploaded)
    assert [key for key, n in arrived.items() if n > 1] == [], "no file reaches a chat twice"
    for f in uploaded:
        assert f["sha256"] == digests[f["name"]], f"{f['name']} arrived with other bytes"
        assert f["name"].startswith(f"c{int(f['chat_id']) - 2000}-"), "each file went to its own chat"
    sent = {(r["chat_id"], r["file_name"]) for r in rows if r["status"] == "sent"}
    assert sent <= set(arrived), "every row marked sent arrived"
    assert set(arrived) - sent <= in_flight, "a file arrived unrecorded only if it was on the wire"
    spool = tmp_path / "data" / "outbox" / "files"
    assert list(spool.iterdir()) == [], "no spooled copy outlives its row"
    assert "may or may not have been delivered" in second_log
    assert log_failures(second_log) == []
