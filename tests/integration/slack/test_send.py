"""Delivering rendered chunks to the fake Slack and classifying what goes wrong."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from connectors.base import ErrorClass, ThreadKey
from tests.fakes.slack_api import MAX_TEXT, FakeSlack
from tests.integration.slack.conftest import Recorder, make_connector, running, send_text

DM = ThreadKey("team-slack", "D0DM00001")
THREAD = ThreadKey("team-slack", "C0GENERAL", "1700000000.000100")


def _long_markdown() -> str:
    parts = ["# Findings\n"]
    for i in range(40):
        parts.append(
            f"Paragraph {i}: " + "the quick brown fox jumps over the lazy dog & <friends>. " * 3 + "\n"
        )
        if i % 8 == 0:
            parts.append(
                "```python\n" + "\n".join(f"print({n} * {n})  # line {n}" for n in range(60)) + "\n```\n"
            )
        if i % 13 == 0:
            parts.append(
                "| name | value |\n|---|---|\n" + "".join(f"| row{n} | {n * n} |\n" for n in range(25))
            )
    text = "\n".join(parts)
    assert len(text) > 10_000
    return text


async def test_dm_reply_is_top_level_and_thread_reply_stays_in_thread(
    fake: FakeSlack, files_dir: Path
) -> None:
    async with running(fake, files_dir) as (connector, _):
        dm = await send_text(connector, DM, "*hi* there")
        threaded = await send_text(connector, THREAD, "in the thread")
        [dm_post] = fake.posted("D0DM00001")
        [thread_post] = fake.posted("C0GENERAL")

    assert dm.ok and dm.platform_message_id == dm_post.ts
    assert dm_post.thread_ts is None
    assert dm_post.text == "*hi* there"
    assert dm_post.mrkdwn is True
    assert dm_post.params["unfurl_links"] is False
    assert threaded.ok and thread_post.thread_ts == "1700000000.000100"


async def test_channel_post_without_thread_replies_to_the_given_message(
    fake: FakeSlack, files_dir: Path
) -> None:
    async with running(fake, files_dir) as (connector, _):
        await send_text(
            connector, ThreadKey("team-slack", "C0GENERAL"), "notice", reply_to="1700000000.000200"
        )
        await send_text(connector, ThreadKey("team-slack", "C0GENERAL"), "announcement")
    first, second = fake.posted("C0GENERAL")
    assert first.thread_ts == "1700000000.000200"
    assert second.thread_ts is None


async def test_plain_chunk_is_escaped_and_not_formatted(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir) as (connector, _):
        result = await send_text(connector, DM, "a < b & <!channel> *not bold*", fmt="plain")
    assert result.ok
    [post] = fake.posted("D0DM00001")
    assert post.text == "a &lt; b &amp; &lt;!channel&gt; *not bold*"
    assert post.mrkdwn is False


async def test_long_answer_arrives_as_valid_chunks_in_order(fake: FakeSlack, files_dir: Path) -> None:
    render = getattr(importlib.import_module("connectors.render"), "render_markdown", None)
    if render is None:
        pytest.skip("connectors.render.render_markdown is not available yet")
    async with running(fake, files_dir) as (connector, _):
        chunks = connector.render(_long_markdown() * 5)  # past Slack's 40,000 characters
        assert len(chunks) >= 2 and all(c.format == "mrkdwn" for c in chunks)
        for chunk in chunks:
            assert (await send_text(connector, THREAD, chunk.text)).ok
    posts = fake.posted("C0GENERAL")
    assert [p.text for p in posts] == [c.text for c in chunks]
    assert all(len(p.text) <= MAX_TEXT and p.thread_ts == THREAD.topic for p in posts)
    assert all(p.text.count("```") % 2 == 0 for p in posts)  # no code block cut open
    assert "&lt;friends&gt;" in posts[0].text


async def test_hand_made_chunks_near_the_limit_are_accepted(fake: FakeSlack, files_dir: Path) -> None:
    code = "```\n" + "x = 1\n" * 6000 + "```"
    chunks = [code[:39_990] + "\n```", "```\n" + code[39_990:], "done"]
    async with running(fake, files_dir) as (connector, _):
        results = [await send_text(connector, THREAD, c) for c in chunks]
    assert all(r.ok for r in results)
    assert [p.text for p in fake.posted("C0GENERAL")] == chunks
    assert len({r.platform_message_id for r in results}) == 3


async def test_rate_limit_is_transient_with_retry_after_and_no_duplicate(
    fake: FakeSlack, files_dir: Path
) -> None:
    async with running(fake, files_dir) as (connector, _):
        fake.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=7)
        refused = await send_text(connector, DM, "hello")
        assert fake.posted("D0DM00001") == []
        retried = await send_text(connector, DM, "hello")
    assert refused.ok is False
    assert refused.error_class is ErrorClass.TRANSIENT
    assert refused.retry_after == 7.0
    assert retried.ok
    assert [p.text for p in fake.posted("D0DM00001")] == ["hello"]
    assert len(fake.calls("chat.postMessage")) == 2  # the client itself did not retry


@pytest.mark.parametrize(
    ("error", "status", "expected"),
    [
        ("invalid_auth", 200, ErrorClass.PERMANENT),
        ("not_in_channel", 200, ErrorClass.PERMANENT),
        ("is_archived", 200, ErrorClass.PERMANENT),
        ("service_unavailable", 503, ErrorClass.TRANSIENT),
        ("internal_error", 200, ErrorClass.AMBIGUOUS),
        ("fatal_error", 500, ErrorClass.AMBIGUOUS),
    ],
)
async def test_slack_errors_are_classified(
    fake: FakeSlack, files_dir: Path, error: str, status: int, expected: ErrorClass
) -> None:
    async with running(fake, files_dir) as (connector, _):
        fake.fail_next("chat.postMessage", error, status=status)
        result = await send_text(connector, DM, "hello")
    assert result.ok is False
    assert result.error_class is expected
    assert error in (result.error or "")


async def test_unknown_channel_and_too_long_are_permanent(fake: FakeSlack, files_dir: Path) -> None:
    fake.fail_channel("C0GONE", "channel_not_found")
    async with running(fake, files_dir) as (connector, _):
        gone = await send_text(connector, ThreadKey("team-slack", "C0GONE", "1.000001"), "hello")
        too_long = await send_text(connector, DM, "y" * (MAX_TEXT + 1))
    assert (gone.error_class, gone.error) == (ErrorClass.PERMANENT, "slack: channel_not_found")
    assert (too_long.error_class, too_long.error) == (ErrorClass.PERMANENT, "slack: msg_too_long")
    assert fake.posted("D0DM00001") == []


async def test_timeout_after_sending_is_ambiguous(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir, request_timeout=0.3) as (connector, _):
        fake.stall_next("chat.postMessage", 2.0)
        result = await send_text(connector, DM, "did this land?")
    assert result.error_class is ErrorClass.AMBIGUOUS
    # It did land: resending blindly would have posted it twice.
    assert [p.text for p in fake.posted("D0DM00001")] == ["did this land?"]


async def test_connection_refused_is_transient(files_dir: Path) -> None:
    async with FakeSlack() as fake:
        connector = make_connector(fake, files_dir, app_token=None, signing_secret=fake.signing_secret)
        await connector.start(Recorder())
    try:  # Slack is gone now
        result = await send_text(connector, DM, "hello?")
    finally:
        await connector.stop()
    assert result.error_class is ErrorClass.TRANSIENT
    assert "connect" in (result.error or "")


async def test_send_before_start_is_transient(fake: FakeSlack, files_dir: Path) -> None:
    result = await send_text(make_connector(fake, files_dir), DM, "early")
    assert result.error_class is ErrorClass.TRANSIENT
    assert fake.posted("D0DM00001") == []
