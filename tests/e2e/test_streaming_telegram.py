"""Streamed replies on Telegram, end to end: the in-process gateway with the real
python-telegram-bot connector between the fake Bot API and a model that streams slowly.

A DM's reply appears as a plain-text preview that is edited at most once per interval and
finally becomes exactly the formatted reply; extra chunks arrive as new messages; a preview
that cannot be edited any more, flood control and groups behave as configured."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import gateway.runtime.providers.anthropic_provider  # noqa: F401  (the SDK import stays out of the timeouts)
from connectors.render import render_markdown
from gateway.daemon import Gateway
from tests.e2e.support import wait_until
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.fakes.model_script import Call
from tests.fakes.telegram_api import FakeTelegramAPI, SentMessage, parse_html
from tests.harness import provider_for, running_gateway, write_config

CHANNEL = "team-telegram"
USER = 4242
GROUP = -1001234567890
BOT = "@talon_test_bot"
INTERVAL = 0.3  # seconds between preview edits in these tests (the default is 1)

ANSWER = "**Streaming** works: " + " ".join(f"word{i}" for i in range(30)) + "."


def slow(text: str, pieces: int = 20, delay: float = 0.05) -> Reply:
    """``text`` streamed in ``pieces`` deltas ``delay`` seconds apart."""
    size = max(1, len(text) // pieces)
    return Reply(chunks=[text[i : i + size] for i in range(0, len(text), size)], chunk_delay=delay)


def rendered(markdown: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """What Telegram shows for ``markdown`` sent whole: each chunk's text and entities."""
    return [parse_html(chunk.text) for chunk in render_markdown(markdown, "telegram")]


def shown(messages: list[SentMessage]) -> list[tuple[str, list[dict[str, Any]]]]:
    return [(m.text, m.entities) for m in messages]


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


@asynccontextmanager
async def gateway_with(
    root: Path,
    fake: FakeTelegramAPI,
    model: FakeAnthropic,
    *,
    bindings: list[dict[str, Any]] | None = None,
    persona: dict[str, Any] | None = None,
    **channel: Any,
) -> AsyncIterator[Gateway]:
    settings = {
        "name": CHANNEL,
        "type": "telegram",
        "token": fake.token,
        "api_base_url": fake.url,
        "stream_interval": INTERVAL,
        **channel,
    }
    config = write_config(
        root,
        provider=provider_for(model),
        personas={"assistant": persona or {}},
        extra={
            "channels": [{"name": "console", "type": "console"}, settings],
            "bindings": bindings or [{"channel": CHANNEL, "persona": "assistant"}],
        },
    )
    async with running_gateway(config) as gw:
        yield gw


def scripted(*replies: Reply) -> Callable[[dict[str, Any]], Reply]:
    queue = list(replies)
    return lambda body: queue.pop(0) if len(queue) > 1 else queue[0]


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegramAPI]:
    async with FakeTelegramAPI() as server:
        yield server


async def final_state(fake: FakeTelegramAPI, chat: int, want: list[tuple[str, Any]]) -> list[SentMessage]:
    await wait_until(lambda: shown(fake.visible_messages(chat)) == want, timeout=15)
    return fake.visible_messages(chat)


async def test_a_dm_reply_streams_into_one_message_that_becomes_exactly_the_final_rendering(
    tmp_path: Path, fake: FakeTelegramAPI
) -> None:
    async with FakeAnthropic(responder=scripted(slow(ANSWER))) as model:
        async with gateway_with(tmp_path, fake, model):
            fake.inject_message(USER, "stream please", user_id=USER)
            [message] = await final_state(fake, USER, rendered(ANSWER))
    assert "bold" in message.entity_types()  # the final rendering, formatted
    previews = message.versions
    assert len(previews) >= 2, "the preview was edited while the model wrote"
    assert all("writing…" in text for text in previews), previews  # never looked final
    assert previews[0] in previews[-1] or len(previews[0]) < len(previews[-1])  # it grew
    assert "**Streaming**" in previews[-1]  # previews are plain text
    assert min(gaps([message.sent_at, *message.edit_times])) >= INTERVAL * 0.9  # within the rate
    assert fake.calls_to("deleteMessage") == []


async def test_a_reply_longer_than_one_message_edits_the_preview_and_sends_the_rest_fresh(
    tmp_path: Path, fake: FakeTelegramAPI
) -> None:
    long = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor " * 40 for i in range(12))
    want = rendered(long)
    assert len(want) >= 2
    async with FakeAnthropic(responder=scripted(slow(long, pieces=20, delay=0.05))) as model:
        async with gateway_with(tmp_path, fake, model):
            fake.inject_message(USER, "a long one", user_id=USER)
            messages = await final_state(fake, USER, want)
    first, *rest = messages
    assert first.edits >= 2 and first.versions[0].endswith("writing…")
    assert all(m.edits == 0 for m in rest)  # extra chunks are new messages


async def test_tool_status_shows_in_the_preview_and_the_text_after_the_tool_is_the_reply(
    tmp_path: Path, fake: FakeTelegramAPI
) -> None:
    first = Reply(text="Let me look.", tool_calls=[Call("list_directory", {"path": "/workspace"})])
    final = Reply(text="The folder is empty.", delay=1.5)
    async with FakeAnthropic(responder=scripted(first, final)) as model:
        async with gateway_with(tmp_path, fake, model, persona={"capabilities": ["fs.read:thread"]}):
            fake.inject_message(USER, "what is in my folder?", user_id=USER)
            [message] = await final_state(fake, USER, rendered("The folder is empty."))
    assert any("⏳ Reading a file…" in v for v in message.versions), message.versions


async def test_a_preview_deleted_mid_stream_gets_the_reply_fresh(
    tmp_path: Path, fake: FakeTelegramAPI
) -> None:
    async with FakeAnthropic(responder=scripted(slow(ANSWER, delay=0.08))) as model:
        async with gateway_with(tmp_path, fake, model):
            fake.inject_message(USER, "stream please", user_id=USER)
            await wait_until(lambda: bool(fake.sent_messages(USER)), timeout=10)
            fake.delete_as_user(USER, fake.sent_messages(USER)[0].message_id)
            [message] = await final_state(fake, USER, rendered(ANSWER))
    assert message.edits == 0 and len(fake.sent_messages(USER)) == 2


async def test_flood_control_on_an_edit_is_waited_out_and_the_reply_still_converges(
    tmp_path: Path, fake: FakeTelegramAPI
) -> None:
    fake.fail_next("editMessageText", 429, "Too Many Requests: retry after 1", retry_after=1)
    async with FakeAnthropic(responder=scripted(slow(ANSWER))) as model:
        async with gateway_with(tmp_path, fake, model):
            fake.inject_message(USER, "stream please", user_id=USER)
            [message] = await final_state(fake, USER, rendered(ANSWER))
    refused_at = fake.call_times_of("editMessageText")[0]
    assert all(t - refused_at >= 0.95 for t in message.edit_times)


async def test_groups_do_not_stream_unless_their_binding_opts_in(
    tmp_path: Path, fake: FakeTelegramAPI
) -> None:
    other = GROUP - 1
    bindings = [
        {"channel": CHANNEL, "persona": "assistant"},
        {"channel": CHANNEL, "chat": str(other), "persona": "assistant", "streaming": "edit"},
    ]
    async with FakeAnthropic(responder=scripted(slow(ANSWER, delay=0.04))) as model:
        async with gateway_with(tmp_path, fake, model, bindings=bindings):
            fake.inject_message(GROUP, f"{BOT} hi", user_id=USER, chat_type="supergroup")
            fake.inject_message(other, f"{BOT} hi", user_id=USER, chat_type="supergroup")
            [quiet] = await final_state(fake, GROUP, rendered(ANSWER))
            [streamed] = await final_state(fake, other, rendered(ANSWER))
    assert quiet.edits == 0
    assert streamed.edits >= 1
    assert min(gaps([streamed.sent_at, *streamed.edit_times])) >= 3 * 0.9  # Telegram's group pace


async def test_native_streaming_uses_drafts_in_a_dm_and_falls_back_to_edits_in_a_group(
    tmp_path: Path, fake: FakeTelegramAPI
) -> None:
    async with FakeAnthropic(responder=scripted(slow(ANSWER))) as model:
        async with gateway_with(tmp_path, fake, model, streaming="native", require_mention=False):
            fake.inject_message(USER, "stream please", user_id=USER)
            [dm] = await final_state(fake, USER, rendered(ANSWER))
            fake.inject_message(GROUP, "and here", user_id=USER, chat_type="supergroup")
            [group] = await final_state(fake, GROUP, rendered(ANSWER))
    drafts = [text for chat, _, text, _ in fake.drafts if chat == USER]
    assert len(drafts) >= 2 and drafts[-1].startswith("**Streaming**")
    assert dm.edits == 0  # the reply itself is one fresh message; the draft vanished
    assert group.edits >= 1 and not any(chat == GROUP for chat, *_ in fake.drafts)


async def test_a_stopped_turn_marks_its_preview_as_interrupted_when_configured(
    tmp_path: Path, fake: FakeTelegramAPI
) -> None:
    async with FakeAnthropic(responder=scripted(slow(ANSWER, pieces=30, delay=0.15))) as model:
        async with gateway_with(tmp_path, fake, model, stale_preview="mark"):
            fake.inject_message(USER, "stream please", user_id=USER)
            await wait_until(lambda: any(m.edits for m in fake.sent_messages(USER)), timeout=10)
            fake.inject_message(USER, "/stop", user_id=USER)
            await wait_until(lambda: len(fake.visible_messages(USER)) >= 2, timeout=10)
            await wait_until(lambda: fake.sent_messages(USER)[0].text.startswith("⚠️"), timeout=10)
    preview, *after = fake.visible_messages(USER)
    assert preview.text == "⚠️ This answer was interrupted before it was finished."
    assert not any("writing…" in m.text for m in after)
    assert ANSWER not in [m.text for m in after]  # the stopped reply never arrived
