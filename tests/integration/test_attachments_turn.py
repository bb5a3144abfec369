"""Files sent back in a real turn: the fake model writes a file and attaches it with
channel_send into its own Telegram conversation; the user gets the text, then the file once
with the bytes it had when it was sent (an edit right after does not change it), then the
reply, below the file (the streamed preview above them is removed); escapes and a file over the channel's limit are refused with what to do instead, and
nothing is left in the outbox's spool."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

from tests.e2e.support import wait_until
from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.harness import provider_for, running_gateway, tool_results, write_config
from tests.store_helpers import fetch_rows

CHANNEL = "team-telegram"
USER = 5151
REPORT = "region,total\nnorth,10\nsouth,12\n"
LABELS = ["channel.send:*", "fs.read:thread", "fs.write:thread"]


def _script(calls: list[Call]) -> Any:
    """Make ``calls`` one at a time, then answer with every result as JSON."""

    def respond(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if len(results) < len(calls):
            return Reply(tool_calls=[calls[len(results)]])
        return Reply(text=json.dumps(results))

    return respond


def _send(content: str, *paths: str) -> Call:
    return Call("channel_send", {"channelId": CHANNEL, "content": content, "attachments": list(paths)})


async def test_a_turn_attaches_a_workspace_file_and_the_user_gets_it_once(tmp_path: Path) -> None:
    calls = [
        Call("write_file", {"file_path": "/workspace/report.csv", "content": REPORT}),
        Call("write_file", {"file_path": "/workspace/big.txt", "content": "x" * 500}),
        _send("Here is the report.", "/workspace/report.csv"),
        # Changed right after it was sent: the user still gets what was attached.
        Call("write_file", {"file_path": "/workspace/report.csv", "content": "changed afterwards"}),
        _send("", "../../../../talon.db"),
        _send("", "/etc/passwd"),
        _send("too big", "/workspace/big.txt"),
        _send("", "/workspace/missing.csv"),
    ]
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=_script(calls)) as model:
        channel = {
            "name": CHANNEL,
            "type": "telegram",
            "token": telegram.token,
            "api_base_url": telegram.url,
            "max_upload_bytes": 400,
            "pacing": {"per_second": 0, "per_chat_per_second": 0, "group_per_minute": 0},
        }
        config = write_config(
            tmp_path,
            provider=provider_for(model),
            extra={"channels": [channel], "bindings": [{"channel": CHANNEL, "persona": "assistant"}]},
            personas={"assistant": {"capabilities": LABELS}},
        )
        async with running_gateway(config) as gw:
            telegram.inject_message(USER, "send me the report as a file", user_id=USER)
            await wait_until(
                lambda: any(m.text.startswith("[[false") for m in telegram.visible_messages(USER)),
                timeout=30,
                what="the reply",
            )
            await gw.components.outbox.flush(5)
            messages = telegram.visible_messages(USER)
            rows = await fetch_rows(
                gw.components.db, "SELECT format, status, file_name, file_path FROM outbox ORDER BY id"
            )
        offered = [t["name"] for t in model.requests[0]["tools"]]
        results = tool_results(model.requests[-1])
    data_dir = tmp_path / "data"

    assert "channel_send" in offered
    schema = next(t for t in model.requests[0]["tools"] if t["name"] == "channel_send")["input_schema"]
    assert "attachments" in schema["properties"]
    # The text, then the file, then the reply: three messages, the file exactly once.
    assert messages[0].text == "Here is the report."
    assert messages[1].document is not None and messages[1].document["file_name"] == "report.csv"
    (received,) = telegram.files_received(USER)
    assert (received.name, received.size) == ("report.csv", len(REPORT))
    assert received.sha256 == hashlib.sha256(REPORT.encode()).hexdigest()
    assert len(messages) == 3 and messages[2].text.startswith("[[false")  # the reply, last
    # The streamed preview came first; it is gone, and nothing was sent twice.
    (preview,) = [m for m in telegram.sent_messages(USER) if m.deleted]
    first_shown = [*preview.versions, preview.text][0]
    assert preview.message_id < messages[0].message_id and ("⏳" in first_shown or "writing…" in first_shown)
    failed, sent = results[2]
    assert not failed
    assert json.loads(sent)["files"] == [
        {"name": "report.csv", "bytes": len(REPORT), "sha256": hashlib.sha256(REPORT.encode()).hexdigest()}
    ]
    refusals = [text for failed, text in results[4:] if failed]
    assert len(refusals) == 4
    assert "climbs above /workspace" in refusals[0] and "this call may use /workspace" in refusals[0]
    assert "is outside the workspace" in refusals[1]
    assert refusals[2] == (
        "/workspace/big.txt is 500 bytes; channel 'team-telegram' (telegram) accepts files up to 400 bytes "
        "(max_upload_bytes in talon.yaml): send a smaller file, or split or compress it"
    )
    assert "does not exist" in refusals[3]
    # One file row, sent; its spooled copy is gone; no refused post left anything behind.
    files = [r for r in rows if r["format"] == "file"]
    assert [(r["status"], r["file_name"]) for r in files] == [("sent", "report.csv")]
    spool = data_dir / "outbox" / "files"
    assert await asyncio.to_thread(lambda: list(spool.iterdir()) if spool.exists() else []) == []
    assert "too big" not in [m.text for m in telegram.sent_messages(USER)]
