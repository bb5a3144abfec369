"""A streamed reply stays below what its turn posted: the model writes (a preview appears),
sends a file into its own chat mid-turn, then answers. Editing the preview would put the
answer above the file; instead the chat ends with the file, then exactly one final reply,
and the preview is gone. Telegram and Discord, through their real client libraries."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gateway.runtime.providers.anthropic_provider  # noqa: F401  (the SDK import stays out of the timeouts)
from connectors.render import render_markdown
from tests.e2e.support import wait_until
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.fakes.model_script import Call
from tests.fakes.telegram_api import FakeTelegramAPI, parse_html
from tests.harness import provider_for, running_gateway, write_config

USER = 4343
LABELS = ["channel.send:*", "fs.read:thread", "fs.write:thread"]
ANSWER = "**Done**: the report is attached above, " + " ".join(f"row{i}" for i in range(20)) + "."


def slow(text: str, pieces: int = 10, delay: float = 0.05) -> Reply:
    size = max(1, len(text) // pieces)
    return Reply(chunks=[text[i : i + size] for i in range(0, len(text), size)], chunk_delay=delay)


def script(channel: str) -> Callable[[dict[str, Any]], Reply]:
    """Write (streamed), save a file, send it into this chat, then answer (streamed)."""
    first = slow("Let me put the report together.")
    replies = [
        Reply(
            chunks=first.chunks,
            chunk_delay=first.chunk_delay,
            tool_calls=[Call("write_file", {"file_path": "/workspace/report.csv", "content": "a,b\n1,2\n"})],
        ),
        Reply(
            tool_calls=[
                Call(
                    "channel_send",
                    {"channelId": channel, "content": "", "attachments": ["/workspace/report.csv"]},
                )
            ]
        ),
        slow(ANSWER),
    ]
    return lambda body: replies.pop(0) if len(replies) > 1 else replies[0]


def config_for(root: Path, model: FakeAnthropic, channel: dict[str, Any]) -> Path:
    return write_config(
        root,
        provider=provider_for(model),
        personas={"assistant": {"capabilities": LABELS}},
        extra={"channels": [channel], "bindings": [{"channel": channel["name"], "persona": "assistant"}]},
    )


async def test_telegram_a_file_sent_mid_turn_stays_above_the_final_reply_and_the_preview_is_gone(
    tmp_path: Path,
) -> None:
    want = [parse_html(chunk.text) for chunk in render_markdown(ANSWER, "telegram")]
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=script("team-telegram")) as model:
        channel = {"name": "team-telegram", "type": "telegram", "token": telegram.token}
        channel |= {"api_base_url": telegram.url, "stream_interval": 0.3}
        async with running_gateway(config_for(tmp_path, model, channel)) as gw:
            telegram.inject_message(USER, "the report, please", user_id=USER)

            def final() -> bool:
                shown = telegram.visible_messages(USER)
                return len(shown) == 2 and [(m.text, m.entities) for m in shown[1:]] == want

            await wait_until(final, timeout=20, what="the file, then the reply")
            await gw.components.outbox.flush(5)
    file, reply = telegram.visible_messages(USER)
    assert file.document is not None and file.document["file_name"] == "report.csv"
    assert "bold" in reply.entity_types() and reply.edits == 0  # sent fresh, formatted
    (preview,) = [m for m in telegram.sent_messages(USER) if m.deleted]
    assert preview.message_id < file.message_id < reply.message_id
    assert "writing…" in [*preview.versions, preview.text][0]  # it was the streamed preview
    assert [m.text for m in telegram.sent_messages(USER)].count(reply.text) == 1  # exactly one reply


async def test_discord_a_file_sent_mid_turn_stays_above_the_final_reply_and_the_preview_is_gone(
    tmp_path: Path,
) -> None:
    want = [chunk.text for chunk in render_markdown(ANSWER, "discord")]
    async with FakeDiscord() as fake, FakeAnthropic(responder=script("team-discord")) as model:
        channel = {"name": "team-discord", "type": "discord", "token": fake.token}
        channel |= {"api_base_url": fake.api_base_url, "gateway_url": fake.gateway_url}
        async with running_gateway(config_for(tmp_path, model, channel)) as gw:
            connector = gw.components.connectors["team-discord"]
            await wait_until(lambda: connector.health.state == "connected", 5.0, "discord connected")
            dm = fake.dm_channel_id
            fake.inject_message(dm, "the report, please", author_id=fake.user_id, guild=False)

            def final() -> bool:
                shown = fake.visible(dm)
                return len(shown) == 2 and [m["content"] for m in shown[1:]] == want

            await wait_until(final, timeout=20, what="the file, then the reply")
            await gw.components.outbox.flush(5)
    file, reply = fake.visible(dm)
    assert [a["filename"] for a in file["attachments"]] == ["report.csv"]
    assert not reply.get("versions")  # sent fresh, not the edited preview
    sent = fake.sent(dm)
    (preview,) = [m for m in sent if m.get("deleted")]
    assert sent.index(preview) < sent.index(file) < sent.index(reply)
    assert "writing…" in [*preview.get("versions", []), preview["content"]][0]
    assert [m["content"] for m in sent].count(reply["content"]) == 1
