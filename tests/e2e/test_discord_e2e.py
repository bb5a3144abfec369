"""Discord end to end: a real in-process gateway (pipeline, queue, turn runner, outbox and the
Discord connector on discord.py) between the fake Discord (REST + gateway websocket) and the
fake model API."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

# The daemon imports the model SDK in the background on first use, which takes seconds on
# a busy machine; importing it with the tests keeps that out of their short reply timeouts.
import gateway.runtime.providers.anthropic_provider  # noqa: F401
from gateway.daemon import Gateway
from tests.e2e.support import transcript, wait_until, wait_until_stored
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.fakes.model_script import last_user_text
from tests.harness import provider_for, running_gateway, say, write_config
from tests.store_helpers import fetch_rows

CHANNEL = "team-discord"
DISCORD_LIMIT = 2000
TYPING_INTERVAL = 0.1


def answer(body: dict[str, Any]) -> Reply:
    """``re: <what the last speaker said>``, without the ``[name]`` the transcript adds in groups."""
    said = last_user_text(body).rsplit("\n\n", 1)[-1]
    return Reply(text="re: " + re.sub(r"^\[[^\]]+\] ", "", said))


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(responder=answer) as server:
        yield server


@asynccontextmanager
async def discord_gateway(
    root: Path, fake: FakeDiscord, model: FakeAnthropic, *, connected: bool = True, **channel: Any
) -> AsyncIterator[Gateway]:
    """A gateway with the console and a Discord channel (``channel`` overrides its settings),
    both bound to ``assistant``; waits until Discord is connected unless ``connected=False``."""
    settings = {
        "name": CHANNEL,
        "type": "discord",
        "token": fake.token,
        "api_base_url": fake.api_base_url,
        "gateway_url": fake.gateway_url,
        "typing_interval": TYPING_INTERVAL,
        **channel,
    }
    config = write_config(
        root,
        provider=provider_for(model),
        extra={
            "channels": [{"name": "console", "type": "console"}, settings],
            "bindings": [
                {"channel": "console", "persona": "assistant"},
                {"channel": CHANNEL, "persona": "assistant"},
            ],
        },
    )
    async with running_gateway(config) as gw:
        if connected:
            connector = gw.components.connectors[CHANNEL]
            await wait_until(lambda: connector.health.state == "connected", 5.0, "discord connected")
        yield gw


def contents(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages]


def reference(message: dict[str, Any]) -> str | None:
    ref = message.get("message_reference")
    return ref["message_id"] if ref else None


# ---------------------------------------------------------------- conversations


async def test_dm_and_mentions_are_answered_in_place_and_chatter_is_only_context(
    tmp_path: Path, fake: FakeDiscord, model: FakeAnthropic
) -> None:
    async with discord_gateway(tmp_path, fake, model) as gw:
        fake.inject_message(fake.dm_channel_id, "hello in private", author_id=fake.user_id, guild=False)
        fake.inject_message(fake.channel_id, "lunch at noon?", author_id=fake.user_id)
        asked = fake.inject_message(
            fake.channel_id, "what is planned?", author_id=fake.user_id, mention_bot=True
        )
        in_thread = fake.inject_message(
            fake.channel_id,
            "and in here?",
            author_id=fake.user_id,
            thread_id=fake.thread_id,
            mention_bot=True,
        )

        (dm_reply,) = await fake.wait_for_sent(fake.dm_channel_id, 1)
        (channel_reply,) = await fake.wait_for_sent(fake.channel_id, 1)
        (thread_reply,) = await fake.wait_for_sent(fake.thread_id, 1)

        # a DM answer is a plain message; in a guild it replies to the question
        assert dm_reply["content"] == "re: hello in private"
        assert reference(dm_reply) is None
        assert channel_reply["content"] == "re: what is planned?"
        assert reference(channel_reply) == asked
        assert thread_reply["content"] == "re: and in here?"
        assert reference(thread_reply) == in_thread
        assert all(m["allowed_mentions"] == {"parse": []} for m in (dm_reply, channel_reply, thread_reply))

        # the unaddressed message got no turn of its own but is in the channel's context
        assert len(model.requests) == 3
        (channel_request,) = [r for r in model.requests if "what is planned?" in transcript(r)]
        assert "lunch at noon?" in transcript(channel_request)
        assert all("lunch" not in transcript(r) for r in model.requests if r is not channel_request)

        # more chatter: stored, not answered; the next mention sees it
        fake.inject_message(fake.channel_id, "pizza instead?", author_id=fake.user_id)
        await wait_until_stored(gw, "pizza instead?")
        await asyncio.sleep(0.3)
        assert len(fake.sent(fake.channel_id)) == 1
        assert len(model.requests) == 3

        fake.inject_message(fake.channel_id, "so what now?", author_id=fake.user_id, mention_bot=True)
        replies = await fake.wait_for_sent(fake.channel_id, 2)
        assert contents(replies) == ["re: what is planned?", "re: so what now?"]
        assert "pizza instead?" in transcript(model.requests[3])


# ---------------------------------------------------------------- long answers


def long_answer() -> str:
    """About 12,000 characters: paragraphs, python code blocks (one longer than a message)
    and a table, each piece tagged with a marker to check nothing is lost or repeated."""
    parts = ["# Release notes\n"]
    for i in range(PARTS):
        parts.append(f"## Part {i}\n")
        parts.append(f"para{i:02d} " + "The deployment went smoothly and every check passed. " * 9 + "\n")
        lines = LONG_BLOCK if i == 3 else 12  # part 3's block alone is over the 2,000 limit
        code = "".join(f"code_{i:02d}_{n:02d} = compute({i}, {n})\n" for n in range(lines))
        parts.append(f"```python\n{code}```\n")
    parts.append(
        "| name | owner | status |\n|---|---|---|\n"
        + "".join(f"| cell{n:02d} | team {n} | green |\n" for n in range(30))
    )
    text = "\n".join(parts)
    assert len(text) >= 10_000
    return text


PARTS = 10
LONG_BLOCK = 100
MARKER = re.compile(r"para\d\d|code_\d\d_\d\d|cell\d\d")


def fences(message: str) -> list[tuple[str, list[str]]]:
    """The fenced code blocks of a message: (opening fence line, code lines). Fails on a
    block left open."""
    blocks: list[tuple[str, list[str]]] = []
    current: tuple[str, list[str]] | None = None
    for line in message.split("\n"):
        if line.startswith("```"):
            if current is None:
                current = (line, [])
            else:
                assert line == "```", f"text after a closing fence: {line!r}"
                blocks.append(current)
                current = None
        elif current is not None:
            current[1].append(line)
    assert current is None, f"code block left open: {message[-200:]!r}"
    return blocks


async def test_a_long_answer_arrives_as_valid_messages_in_order(
    tmp_path: Path, fake: FakeDiscord, model: FakeAnthropic
) -> None:
    text = long_answer()
    model.script(Reply(text=text, chunks=[text[i : i + 1000] for i in range(0, len(text), 1000)]))
    async with discord_gateway(tmp_path, fake, model) as gw:
        expected = gw.components.connectors[CHANNEL].render(text)
        asked = fake.inject_message(
            fake.channel_id, "write the release notes", author_id=fake.user_id, mention_bot=True
        )
        sent = await fake.wait_for_sent(fake.channel_id, len(expected), timeout=10)
        await asyncio.sleep(0.2)
        sent = fake.sent(fake.channel_id)

    assert len(sent) >= 6
    assert contents(sent) == [c.text for c in expected]
    assert fake.send_attempts(fake.channel_id) == len(sent)  # every chunk accepted first time
    assert all(len(m["content"]) <= DISCORD_LIMIT for m in sent)
    # the first message replies to the question, the rest follow it
    assert reference(sent[0]) == asked
    assert [reference(m) for m in sent[1:]] == [None] * (len(sent) - 1)

    blocks = [block for m in sent for block in fences(m["content"])]
    code_blocks = [b for b in blocks if any(line.startswith("code_") for line in b[1])]
    assert len(code_blocks) > PARTS  # the long block was split...
    assert {opening for opening, _ in code_blocks} == {"```python"}  # ...and reopened as python
    assert any("cell00" in line for _, lines in blocks for line in lines)  # the table is a code block

    # nothing lost, nothing repeated, nothing out of order
    assert MARKER.findall("\n".join(contents(sent))) == MARKER.findall(text)
    assert len(MARKER.findall(text)) == PARTS + (PARTS - 1) * 12 + LONG_BLOCK + 30


# ---------------------------------------------------------------- flood control


@pytest.mark.parametrize("via", [True, False], ids=["waited-by-discord.py", "retried-by-outbox"])
async def test_flood_control_delays_the_reply_once_without_duplicate(
    tmp_path: Path, fake: FakeDiscord, model: FakeAnthropic, via: bool
) -> None:
    """With Discord's ``Via`` header discord.py sleeps and resends; without it (a proxy's
    429) the send fails with ``retry_after`` and the outbox resends after that time."""
    async with discord_gateway(tmp_path, fake, model):
        fake.fail_next_send(429, retry_after=1.0, via=via)
        fake.inject_message(fake.dm_channel_id, "quick question", author_id=fake.user_id, guild=False)

        await wait_until(lambda: fake.send_attempts(fake.dm_channel_id) >= 1, 5.0, "the first send")
        refused_at = time.monotonic()
        await fake.wait_for_sent(fake.dm_channel_id, 1, timeout=5)
        waited = time.monotonic() - refused_at
        await asyncio.sleep(0.3)

    assert waited >= 0.95
    assert contents(fake.sent(fake.dm_channel_id)) == ["re: quick question"]
    assert fake.send_attempts(fake.dm_channel_id) == 2
    assert len(model.requests) == 1


# ---------------------------------------------------------------- redelivery


async def test_a_replayed_message_create_is_answered_once(
    tmp_path: Path, fake: FakeDiscord, model: FakeAnthropic
) -> None:
    async with discord_gateway(tmp_path, fake, model) as gw:
        asked = fake.inject_message(
            fake.channel_id, "count me once", author_id=fake.user_id, mention_bot=True
        )
        await fake.wait_for_sent(fake.channel_id, 1)

        fake.redeliver(asked)  # the same MESSAGE_CREATE dispatched again
        fake.replay_on_resume(asked)  # and replayed once more by a RESUME
        await fake.disconnect_all()
        await fake.wait_for_ready(resumes=1)
        connector = gw.components.connectors[CHANNEL]
        await wait_until(lambda: connector.health.state == "connected", 5.0, "connected again")
        # messages of one channel are handled in order, so this one comes after the copies
        fake.inject_message(fake.channel_id, "and this one", author_id=fake.user_id, mention_bot=True)
        await fake.wait_for_sent(fake.channel_id, 2)
        await asyncio.sleep(0.3)

        users = await fetch_rows(
            gw.components.db, "SELECT text FROM messages WHERE role = 'user' ORDER BY id"
        )
        copies = await fetch_rows(
            gw.components.db, "SELECT event_id FROM inbox_dedupe WHERE event_id = ?", (asked,)
        )

    assert contents(fake.sent(fake.channel_id)) == ["re: count me once", "re: and this one"]
    assert len(model.requests) == 2
    assert [r["text"] for r in users] == ["count me once", "and this one"]
    assert len(copies) == 1
    assert len(fake.gateway.identifies) == 1 and fake.gateway.resumes == 1


# ---------------------------------------------------------------- access control


async def test_an_unauthorized_user_gets_nothing_and_nothing_is_stored(
    tmp_path: Path, fake: FakeDiscord, model: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="talon.policy")

    def refusals() -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "talon.policy" and r.getMessage() == "refused inbound message"
        ]

    async with discord_gateway(tmp_path, fake, model, allowed_users=["424242"]) as gw:
        fake.inject_message(fake.dm_channel_id, "let me in", author_id=fake.user_id, guild=False)
        fake.inject_message(fake.channel_id, "hey bot", author_id=fake.user_id, mention_bot=True)
        await wait_until(lambda: len(refusals()) >= 2, 5.0, "two refusals")
        await asyncio.sleep(0.3)

        messages = await fetch_rows(gw.components.db, "SELECT id FROM messages")
        threads = await fetch_rows(gw.components.db, "SELECT id FROM threads")
        events = await fetch_rows(gw.components.db, "SELECT event_id FROM inbox_dedupe")

    assert messages == [] and threads == [] and events == []
    assert fake.sent(fake.dm_channel_id) == [] and fake.sent(fake.channel_id) == []
    assert fake.typing_count(fake.dm_channel_id) == 0 and fake.typing_count(fake.channel_id) == 0
    assert model.requests == []
    assert [(r.channel, r.sender, r.chat, r.why) for r in refusals()] == [  # type: ignore[attr-defined]
        (CHANNEL, fake.user_id, fake.dm_channel_id, "user not in allowed_users"),
        (CHANNEL, fake.user_id, fake.channel_id, "user not in allowed_users"),
    ]
    assert "let me in" not in caplog.text and "hey bot" not in caplog.text


# ---------------------------------------------------------------- typing indicator


async def test_typing_is_shown_while_the_model_is_slow_and_stops_after(
    tmp_path: Path, fake: FakeDiscord, model: FakeAnthropic
) -> None:
    model.script(Reply(text="done thinking", delay=1.0))
    async with discord_gateway(tmp_path, fake, model):
        fake.inject_message(
            fake.channel_id, "think hard", author_id=fake.user_id, thread_id=fake.thread_id, mention_bot=True
        )

        await fake.wait_for_typing(fake.thread_id, 3, timeout=5)  # shown and kept alive...
        assert fake.sent(fake.thread_id) == []  # ...while the model is still thinking
        (reply,) = await fake.wait_for_sent(fake.thread_id, 1, timeout=5)
        await asyncio.sleep(0.05)  # a trigger already on the wire may still land
        after_reply = fake.typing_count(fake.thread_id)
        await asyncio.sleep(4 * TYPING_INTERVAL)
        later = fake.typing_count(fake.thread_id)

    assert reply["content"] == "done thinking"
    assert later == after_reply
    assert fake.typing_count(fake.channel_id) == 0  # shown in the thread, not its parent


# ---------------------------------------------------------------- notifications


async def test_a_notification_is_posted_to_the_home_chat(
    tmp_path: Path, fake: FakeDiscord, model: FakeAnthropic
) -> None:
    async with discord_gateway(tmp_path, fake, model, home_chat=fake.channel_id) as gw:
        result = await gw.components.poster.notify(CHANNEL, None, "**deploy** done")
        (posted,) = await fake.wait_for_sent(fake.channel_id, 1)
        await asyncio.sleep(0.2)

    assert len(result.outbox_ids) == 1
    assert contents(fake.sent(fake.channel_id)) == ["**deploy** done"]
    assert reference(posted) is None
    assert posted["allowed_mentions"] == {"parse": []}
    assert fake.sent(fake.dm_channel_id) == []
    assert model.requests == []  # posted as is, no turn


async def test_a_notification_is_in_the_context_after_earlier_conversation(
    tmp_path: Path, fake: FakeDiscord, model: FakeAnthropic
) -> None:
    async with discord_gateway(tmp_path, fake, model, home_chat=fake.channel_id) as gw:
        fake.inject_message(fake.channel_id, "ship it", author_id=fake.user_id, mention_bot=True)
        await fake.wait_for_sent(fake.channel_id, 1)
        await gw.components.poster.notify(CHANNEL, None, "**deploy** done")
        await fake.wait_for_sent(fake.channel_id, 2)
        fake.inject_message(fake.channel_id, "what happened?", author_id=fake.user_id, mention_bot=True)
        await fake.wait_for_sent(fake.channel_id, 3)

    assert "**deploy** done" in transcript(model.requests[1])


async def test_a_notification_that_opens_a_thread_is_in_the_next_turns_context(
    tmp_path: Path, fake: FakeDiscord, model: FakeAnthropic
) -> None:
    async with discord_gateway(tmp_path, fake, model, home_chat=fake.channel_id) as gw:
        await gw.components.poster.notify(CHANNEL, None, "**deploy** done")
        await fake.wait_for_sent(fake.channel_id, 1)
        fake.inject_message(fake.channel_id, "what happened?", author_id=fake.user_id, mention_bot=True)
        await fake.wait_for_sent(fake.channel_id, 2)

    assert "**deploy** done" in transcript(model.requests[0])


# ---------------------------------------------------------------- start-up failure


async def test_a_bad_token_fails_the_channel_but_the_gateway_runs(
    tmp_path: Path, fake: FakeDiscord, model: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with discord_gateway(tmp_path, fake, model, token="stale-token-123", connected=False) as gw:
        channels = (await gw.components.status.report()).channels
        turn = await say(gw, "still there?")

    state = channels[CHANNEL]
    assert state.state == "failed"
    assert state.detail.startswith(f"{CHANNEL}: Discord rejected the bot token")
    assert "DISCORD_BOT_TOKEN" in state.detail
    assert "stale-token-123" not in state.detail and "stale-token-123" not in caplog.text
    assert channels["console"].state == "connected"
    assert turn.status == "completed" and turn.text == "re: still there?"
    assert fake.gateway.identifies == []
