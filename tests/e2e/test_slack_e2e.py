"""Slack through the whole gateway: the fake Slack (Socket Mode, or signed HTTP events) ->
the real connector, pipeline, queue, turn runner and outbox -> the fake model -> replies
posted back to the fake Slack with ``chat.postMessage``."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from connectors.render import plain_text
from gateway.daemon import Gateway
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.fakes.model_script import last_user_text
from tests.fakes.slack_api import MAX_TEXT, Envelope, FakeSlack
from tests.harness import provider_for, running_gateway, say, write_config
from tests.store_helpers import fetch_row, fetch_rows

NAME = "team-slack"
DM = "D0DM00001"
GENERAL = "C0GENERAL"
ALERTS = "C0ALERTS1"
ADA = "U0HUMAN01"
BOB = "U0HUMAN02"
MODES = ["socket", "http"]
# Generous: only a failing wait runs this long, and the first turn of a fresh process
# imports the model SDK.
WAIT = 30.0


def bold_echo(body: dict[str, Any]) -> Reply:
    """Answer with Markdown, so a reply shows whether it was rendered for Slack."""
    return Reply(text=f"**echo**: {last_user_text(body)}")


def slack_channel(slack: FakeSlack, mode: str, **overrides: Any) -> dict[str, Any]:
    """The ``channels`` entry for the fake Slack; ``http`` receives events on a free port."""
    channel: dict[str, Any] = {
        "name": NAME,
        "type": "slack",
        "bot_token": slack.bot_token,
        "api_base_url": slack.base_url,
    }
    if mode == "socket":
        channel["app_token"] = slack.app_token
    else:
        channel.update(signing_secret=slack.signing_secret, http_port=0)
    channel.update(overrides)
    return channel


@asynccontextmanager
async def slack_gateway(
    root: Path, model: FakeAnthropic, slack: FakeSlack, mode: str = "socket", **overrides: Any
) -> AsyncIterator[Gateway]:
    """A running gateway with the Slack channel (bound to ``assistant``) and the console.

    Once the channel is up, the fake delivers events to it: over the Socket Mode
    connection, or as signed requests to the HTTP endpoint it listens on.
    """
    config = write_config(
        root,
        provider=provider_for(model),
        extra={
            "channels": [{"name": "console", "type": "console"}, slack_channel(slack, mode, **overrides)],
            "bindings": [
                {"channel": "console", "persona": "assistant"},
                {"channel": NAME, "persona": "assistant"},
            ],
        },
    )
    sockets_before = slack.connections
    async with running_gateway(config) as gw:
        connector = gw.components.connectors[NAME]
        if connector.health.state == "connected":
            if mode == "http":
                slack.events_url = getattr(connector, "events_url", None)
                assert slack.events_url, "the HTTP events endpoint is not listening"
            else:
                await slack.wait_for_connections(sockets_before + 1)
        yield gw


async def settled(gw: Gateway, timeout: float = WAIT) -> None:
    """Wait until no turn is queued or running and nothing waits in the outbox."""
    deadline = time.monotonic() + timeout
    while True:
        row = await fetch_row(
            gw.components.db,
            "SELECT (SELECT COUNT(*) FROM queue_items WHERE status IN ('pending', 'leased')) "
            "+ (SELECT COUNT(*) FROM outbox WHERE status IN ('pending', 'sending')) AS busy",
        )
        if row["busy"] == 0 and gw.components.queue.running_count == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the gateway did not settle within {timeout}s")
        await asyncio.sleep(0.02)


def envelope_of(slack: FakeSlack, channel: str, ts: str, kind: str = "message") -> Envelope:
    """The delivery of one injected message (``kind`` ``app_mention`` for its second one)."""
    [envelope] = [
        e
        for e in slack.envelopes
        if e.event.get("channel") == channel and e.event.get("ts") == ts and e.event.get("type") == kind
    ]
    return envelope


async def acked(slack: FakeSlack, *envelopes: Envelope) -> None:
    """Wait until Slack was told these deliveries arrived: only after the intake committed."""
    await slack.wait_until(lambda: all(e.acked for e in envelopes), WAIT, "the acknowledgements")


async def all_acked(slack: FakeSlack) -> None:
    """Wait until every delivery so far was acknowledged, Slack's echoes of the bot's own
    posts included."""
    await slack.wait_until(lambda: not slack.unacked(), WAIT, "every acknowledgement")


async def user_texts(gw: Gateway) -> list[str]:
    rows = await fetch_rows(gw.components.db, "SELECT text FROM messages WHERE role = 'user' ORDER BY id")
    return [r["text"] for r in rows]


# ---------------------------------------------------------------- 1. where replies go


@pytest.mark.parametrize("mode", MODES)
async def test_dm_and_mention_get_rendered_replies_and_chatter_becomes_context(
    tmp_path: Path, mode: str
) -> None:
    async with FakeAnthropic(responder=bold_echo) as model, FakeSlack() as slack:
        slack.add_user(ADA, "ada", display_name="Ada")
        slack.add_user(BOB, "bob", display_name="Bob")
        async with slack_gateway(tmp_path, model, slack, mode) as gw:
            await slack.inject_message(DM, "hello there", user=ADA)
            [dm_reply] = await slack.wait_for_posted(DM, 1, timeout=WAIT)

            # A top-level channel message opens a thread under itself; chatter in it that
            # does not mention the bot is kept, and a mention later in that thread is answered.
            root = await slack.inject_message(GENERAL, "planning lunch", channel_type="channel", user=ADA)
            await slack.inject_message(
                GENERAL, "lunch at noon", channel_type="channel", user=BOB, thread_ts=root
            )
            ask = await slack.inject_message(
                GENERAL, "when is lunch?", channel_type="channel", user=ADA, thread_ts=root, mention=True
            )
            [group_reply] = await slack.wait_for_posted(GENERAL, 1, timeout=WAIT)
            # A mention at the top of the channel is answered in a new thread under it.
            top = await slack.inject_message(
                GENERAL, "status?", channel_type="channel", user=BOB, mention=True
            )
            _, top_reply = await slack.wait_for_posted(GENERAL, 2, timeout=WAIT)
            both = [
                envelope_of(slack, GENERAL, ts, kind)
                for ts in (ask, top)
                for kind in ("message", "app_mention")
            ]
            await acked(slack, *both)
            await settled(gw)
            stored = await user_texts(gw)

    assert dm_reply.text == "*echo*: hello there"  # Markdown bold became Slack's *bold*
    assert dm_reply.mrkdwn is True
    assert dm_reply.thread_ts is None  # a DM is one conversation, not threaded

    assert group_reply.thread_ts == root  # answered inside the thread, not in the channel
    assert group_reply.text.startswith("*echo*: ") and "when is lunch?" in group_reply.text
    assert top_reply.thread_ts == top and "status?" in top_reply.text
    assert len(slack.posted(GENERAL)) == 2  # no answer to the chatter

    # One model call per addressed message: none for the chatter, none for Slack's second
    # delivery of a mention (``message`` then ``app_mention``).
    assert len(model.requests) == 3
    context = json.dumps(model.requests[1]["messages"])
    assert context.index("planning lunch") < context.index("lunch at noon") < context.index("when is lunch?")
    assert "hello there" not in context  # the DM is another conversation
    assert "lunch" not in json.dumps(model.requests[2]["messages"])  # so is another thread
    assert stored == [
        "hello there",
        "planning lunch",
        "lunch at noon",
        "@talon when is lunch?",
        "@talon status?",
    ]


# ---------------------------------------------------------------- 2. long answers


def long_answer(sections: int, listing_lines: int) -> tuple[str, list[str]]:
    """A Markdown answer with headings, code blocks (with a language), tables and, with
    ``listing_lines``, one code block longer than a whole Slack message; returns it with
    markers that must show up once each, in this order."""
    parts: list[str] = []
    markers: list[str] = []
    for n in range(sections):
        markers.append(f"para-{n:03d}")
        parts.append(f"## Section {n}\n\nThis is para-{n:03d}, with **bold** and `inline` text.")
        lines = [f"value_{n:03d}_{i} = compute({i}, 'x' * {i})  # mark-{n:03d}-{i:02d}" for i in range(10)]
        markers.extend(f"mark-{n:03d}-{i:02d}" for i in range(10))
        parts.append("```python\n" + "\n".join(lines) + "\n```")
        if n % 6 == 0:
            rows = [f"| row-{n:03d}-{r} | {r * r} | ok |" for r in range(5)]
            markers.extend(f"row-{n:03d}-{r}" for r in range(5))
            parts.append("| name | square | state |\n|---|---|---|\n" + "\n".join(rows))
    if listing_lines:
        listing = [f"print('line {i:04d} of the generated report listing')" for i in range(listing_lines)]
        markers.extend(listing)  # whole lines: a cut inside a code line would lose one
        parts.append("```python\n" + "\n".join(listing) + "\n```")
    markers.append("the-end")
    parts.append("That is all: the-end.")
    return "\n\n".join(parts), markers


@pytest.mark.parametrize(
    ("sections", "listing_lines", "size", "messages"),
    [
        (16, 0, (9_000, 11_000), 1),  # fits Slack's 40,000-character message: not split
        (40, 1_500, (90_000, 110_000), 3),
    ],
)
async def test_a_long_answer_arrives_as_ordered_valid_chunks(
    tmp_path: Path, sections: int, listing_lines: int, size: tuple[int, int], messages: int
) -> None:
    answer, markers = long_answer(sections, listing_lines)
    assert size[0] <= len(answer) <= size[1]
    deltas = [answer[i : i + 4000] for i in range(0, len(answer), 4000)]
    async with FakeAnthropic() as model, FakeSlack() as slack:
        model.script(Reply(chunks=deltas, output_tokens=900))
        async with slack_gateway(tmp_path, model, slack) as gw:
            await slack.inject_message(DM, "write the report", user=ADA)
            await slack.wait_for_posted(DM, messages, timeout=WAIT)
            await settled(gw)
            rows = await fetch_rows(gw.components.db, "SELECT status, plain FROM outbox ORDER BY id")

    posted = slack.posted(DM)
    assert len(posted) == len(rows) == messages and {r["status"] for r in rows} == {"sent"}
    for message in posted:
        assert 0 < len(message.text) <= MAX_TEXT
        assert message.mrkdwn is True and message.thread_ts is None
        assert message.text.count("```") % 2 == 0, "a code block is left open"
        assert "```python" not in message.text  # Slack has no code languages; it would show as code
        assert "|---|" not in message.text  # tables are laid out, not left as Markdown source
    # Everything the model said arrives once, in order, across the messages.
    shown = "\n".join(p.text for p in posted)
    positions = [shown.find(m) for m in markers]
    assert -1 not in positions, [m for m, p in zip(markers, positions, strict=True) if p == -1][:5]
    assert positions == sorted(positions)
    assert [m for m in markers if shown.count(m) != 1] == []
    assert "".join(r["plain"] for r in rows) == plain_text(answer)


# ---------------------------------------------------------------- 3. rate limits


async def test_a_rate_limited_reply_is_sent_once_after_retry_after(tmp_path: Path) -> None:
    async with FakeAnthropic(responder=bold_echo) as model, FakeSlack() as slack:
        async with slack_gateway(tmp_path, model, slack) as gw:
            slack.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=1)
            await slack.inject_message(DM, "are you there?", user=ADA)
            [reply] = await slack.wait_for_posted(DM, 1, timeout=WAIT)
            await settled(gw)

    refused, landed = slack.call_times("chat.postMessage")  # exactly two attempts
    assert landed - refused >= 0.99  # Slack's Retry-After: 1 was honoured
    assert reply.text == "*echo*: are you there?"
    assert len(slack.posted(DM)) == 1
    assert len(model.requests) == 1  # the reply was resent, not regenerated


# ---------------------------------------------------------------- 4. redelivery


@pytest.mark.parametrize("mode", MODES)
async def test_a_redelivered_event_is_answered_once(tmp_path: Path, mode: str) -> None:
    async with FakeAnthropic(responder=bold_echo) as model, FakeSlack() as slack:
        async with slack_gateway(tmp_path, model, slack, mode) as gw:
            ts = await slack.inject_message(DM, "only once, please", user=ADA)
            await slack.wait_for_posted(DM, 1, timeout=WAIT)
            envelope = envelope_of(slack, DM, ts)
            await settled(gw)
            await all_acked(slack)
            # The acknowledgement got lost: Slack retries the same event.
            envelope.acked = False
            assert await slack.redeliver_unacked() == 1
            await acked(slack, envelope)
            await settled(gw)
        # After a restart the connector remembers nothing; the store still knows the event.
        envelope.acked = False
        async with slack_gateway(tmp_path, model, slack, mode) as gw:
            assert await slack.redeliver_unacked() == 1
            await acked(slack, envelope)
            await settled(gw)
            stored = await user_texts(gw)

    assert envelope.attempts == 3
    assert len(slack.posted(DM)) == 1
    assert len(model.requests) == 1
    assert stored == ["only once, please"]


# ---------------------------------------------------------------- 5. policy


@pytest.mark.parametrize("mode", MODES)
async def test_an_unauthorized_user_gets_nothing_and_nothing_is_stored(
    tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="talon")
    async with FakeAnthropic(responder=bold_echo) as model, FakeSlack() as slack:
        async with slack_gateway(tmp_path, model, slack, mode, allowed_users=["U0FRIEND1"]) as gw:
            ts = await slack.inject_message(DM, "let me in", user="U0STRANGE")
            await acked(slack, envelope_of(slack, DM, ts))  # acknowledged: Slack won't retry it
            await settled(gw)
            threads = await fetch_rows(gw.components.db, "SELECT * FROM threads")
            messages = await fetch_rows(gw.components.db, "SELECT * FROM messages")
            seen = await fetch_rows(gw.components.db, "SELECT * FROM inbox_dedupe")
            records = list(caplog.records)

    assert (threads, messages, seen) == ([], [], [])
    assert slack.posted(DM) == [] and slack.reaction_log == []
    assert model.requests == []
    # The refusal is logged once, with who and why; nothing else complains about it.
    [refusal] = [r for r in records if r.getMessage() == "refused inbound message"]
    assert refusal.name == "talon.policy"
    logged = (refusal.sender, refusal.chat, refusal.why)  # type: ignore[attr-defined]
    assert logged == ("U0STRANGE", DM, "user not in allowed_users")
    assert [r.getMessage() for r in records if r.levelno >= logging.WARNING] == []


# ---------------------------------------------------------------- 6. working indicator


async def test_the_working_reaction_shows_while_the_model_is_slow(tmp_path: Path) -> None:
    async with FakeAnthropic() as model, FakeSlack() as slack:
        model.script(Reply(text="thought about it", delay=0.8))
        async with slack_gateway(tmp_path, model, slack) as gw:
            ts = await slack.inject_message(DM, "think hard", user=ADA)
            await slack.wait_until(lambda: slack.reactions(DM, ts) == {"eyes"}, WAIT, "the working reaction")
            assert slack.posted(DM) == []  # shown while the model is still working
            [reply] = await slack.wait_for_posted(DM, 1, timeout=WAIT)
            await slack.wait_until(lambda: not slack.reactions(DM, ts), WAIT, "the reaction to go")
            await settled(gw)

    assert reply.text == "thought about it"
    assert slack.reaction_log == [
        ("reactions.add", DM, ts, "eyes"),
        ("reactions.remove", DM, ts, "eyes"),
    ]


# ---------------------------------------------------------------- 7. notifications


async def test_a_notification_goes_to_the_home_chat(tmp_path: Path) -> None:
    async with FakeAnthropic() as model, FakeSlack() as slack:
        async with slack_gateway(tmp_path, model, slack, home_chat=ALERTS) as gw:
            result = await gw.components.poster.notify(NAME, None, "**deploy** done")
            [posted] = await slack.wait_for_posted(ALERTS, 1, timeout=WAIT)
            await settled(gw)
            stored = await fetch_rows(
                gw.components.db,
                "SELECT m.role, m.text, t.chat_id FROM messages m JOIN threads t ON t.id = m.thread_id",
            )

    assert len(result.outbox_ids) == 1
    assert posted.text == "*deploy* done" and posted.mrkdwn is True
    assert posted.thread_ts is None
    # Kept on the home chat's thread, so the persona there sees it later.
    assert [(r["role"], r["chat_id"]) for r in stored] == [("assistant", ALERTS)]
    assert "**deploy** done" in stored[0]["text"]
    assert model.requests == []


# ---------------------------------------------------------------- 8. bad tokens


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("bot_token", ["rejected the bot token (invalid_auth)", "SLACK_BOT_TOKEN"]),
        ("app_token", ["refused the app token for Socket Mode (invalid_auth)", "SLACK_APP_TOKEN"]),
    ],
)
async def test_a_bad_token_fails_the_channel_but_not_the_gateway(
    tmp_path: Path, token: str, expected: list[str]
) -> None:
    async with FakeAnthropic() as model, FakeSlack() as slack:
        wrong = {"bot_token": "xoxb-0000-0000-wrong", "app_token": "xapp-1-A0-0000-wrong"}[token]
        async with slack_gateway(tmp_path, model, slack, **{token: wrong}) as gw:
            channel = (await gw.components.status.report()).channels[NAME]
            turn = await say(gw, "still there?")

    assert channel.state == "failed"
    assert all(part in channel.detail for part in expected), channel.detail
    assert wrong not in channel.detail  # the secret is not repeated back
    assert slack.connections == 0
    assert turn.status == "completed" and turn.text == "echo: still there?"
