"""channel_send end to end in one process: a console turn whose model calls the tool posts
into another channel through the outbox, the recipient thread keeps it, and refusals
reach the model as tool results it can act on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, write_config
from tests.store_helpers import fetch_row, fetch_rows


def _config(tmp_path: Path, fake: FakeAnthropic, labels: list[str]) -> Path:
    return write_config(
        tmp_path,
        provider=provider_for(fake),
        extra={
            "channels": [
                {"name": "console", "type": "console"},
                {"name": "other", "type": "console", "home_chat": "inbox"},
                {"name": "nohome", "type": "console", "home_chat": None},
                {"name": "ops", "type": "console"},
            ],
            "bindings": [
                {"channel": "console", "persona": "assistant"},
                {"channel": "other", "persona": "listener"},
            ],
        },
        personas={"assistant": {"capabilities": labels}, "listener": {}},
    )


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]
    return [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


def _system(body: dict[str, Any]) -> str:
    system = body["system"]
    return system if isinstance(system, str) else " ".join(b["text"] for b in system)


async def test_a_message_sent_to_another_channel_is_delivered_rendered_and_recorded(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        fake.script(
            Reply(
                tool_calls=[Call("channel_send", {"channelId": "other", "content": "**Deploy** finished"})]
            ),
            Reply(text="Posted it."),
        )
        async with running_gateway(_config(tmp_path, fake, ["channel.send:other"])) as gw:
            other = gw.components.control.console("other")
            assert other is not None
            with other.attach("inbox") as deliveries:
                turn = await say(gw, "tell the other channel the deploy is done")
                delivered = await asyncio.wait_for(deliveries.get(), 5)
            recipient = await fetch_row(
                gw.components.db,
                "SELECT t.id, t.persona, m.text, m.persona AS sender FROM threads t JOIN messages m ON m.thread_id = t.id "
                "WHERE t.channel = 'other' AND t.chat_id = 'inbox'",
            )
            await gw.components.host_tools.bridge.audit.flush()
            audit = await fetch_rows(
                gw.components.db, "SELECT tool, decision, status, detail FROM audit_log ORDER BY id"
            )
    assert turn.status == "completed" and turn.text == "Posted it."
    # The console's native format is Markdown (the chat client renders it).
    assert (delivered["type"], delivered["text"]) == ("message", "**Deploy** finished")
    assert recipient["persona"] == "listener" and recipient["sender"] == "assistant"
    assert recipient["text"].startswith("[channel_send from persona assistant in console:main]")
    assert recipient["text"].endswith("**Deploy** finished")
    (result,) = _tool_results(fake.requests[1])
    assert "is_error" not in result
    assert json.loads(result["content"]) == {
        "sent": True,
        "channel": "other",
        "chat": "inbox",
        "threadId": recipient["id"],
        "messages": 1,
    }
    assert [(a["tool"], a["decision"], a["status"]) for a in audit] == [
        ("channel_send", "allowed", None),
        ("channel_send", "result", "ok"),
    ]
    assert "channelId='other'" in audit[0]["detail"] and "Deploy" not in audit[0]["detail"]
    # The tool and its instructions were offered to the model.
    assert [t["name"] for t in fake.requests[0]["tools"]] == ["channel_send"]
    assert "## Posting to other channels (channel_send)" in _system(fake.requests[0])


async def test_sending_to_this_conversations_channel_lands_here(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        fake.script(
            Reply(tool_calls=[Call("channel_send", {"channelId": "console", "content": "a note for here"})]),
            Reply(text="done"),
        )
        async with running_gateway(_config(tmp_path, fake, ["channel.send:*"])) as gw:
            turn = await say(gw, "remind me here", thread="desk")
            await gw.components.outbox.flush(5)
            rows = await fetch_rows(
                gw.components.db,
                # The console streams: the reply goes below the note, and a last row drops the preview.
                "SELECT o.text, o.status, o.thread_id FROM outbox o WHERE o.chat_id = 'desk' "
                "AND o.format != 'drop_preview' ORDER BY o.id",
            )
    assert turn.text == "done"
    assert [(r["text"], r["status"], r["thread_id"]) for r in rows] == [
        ("a note for here", "sent", turn.intake.thread_id),
        ("done", "sent", turn.intake.thread_id),
    ]


async def test_refusals_reach_the_model_as_error_results(tmp_path: Path) -> None:
    calls = [
        Call("channel_send", {"channelId": "ops", "content": "x"}),
        Call("channel_send", {"channelId": "nohome", "content": "x"}),
        Call("channel_send", {"channelId": "nowhere", "content": "x"}),
        Call("channel_send", {"content": "x"}),
    ]
    async with FakeAnthropic() as fake:
        fake.script(Reply(tool_calls=calls), Reply(text="I could not send it."))
        labels = ["channel.send:other", "channel.send:nohome", "channel.send:nowhere"]
        async with running_gateway(_config(tmp_path, fake, labels)) as gw:
            turn = await say(gw, "send it everywhere")
            sent = await fetch_row(
                gw.components.db, "SELECT COUNT(*) AS n FROM threads WHERE channel != 'console'"
            )
    assert turn.text == "I could not send it."
    results = _tool_results(fake.requests[1])
    assert all(r.get("is_error") for r in results)
    assert [r["content"] for r in results] == [
        "channelId 'ops' is not permitted for this persona; its labels allow only 'other', 'nohome', 'nowhere'",
        "channel 'nohome' has no home_chat and is not this conversation's channel; "
        "set home_chat for it in talon.yaml or send to 'console'",
        "unknown channel 'nowhere'; configured channels: console, other, nohome, ops",
        "invalid arguments for channel_send: channelId is required",
    ]
    assert sent["n"] == 0
