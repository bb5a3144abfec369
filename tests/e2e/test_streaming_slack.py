"""Streamed replies on Slack, end to end: the in-process gateway with the real slack-sdk
connector (Socket Mode) between the fake Slack and a model that streams slowly.

A DM's reply is a preview edited with ``chat.update`` at most once a second that becomes
exactly the mrkdwn rendering; in a channel thread with ``streaming: native`` the reply is a
chat stream, the tool status goes to ``assistant.threads.setStatus``, and the final
rendering replaces the streamed message."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import gateway.runtime.providers.anthropic_provider  # noqa: F401  (the SDK import stays out of the timeouts)
from connectors.render import render_markdown
from gateway.daemon import Gateway
from tests.e2e.support import wait_until
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.fakes.model_script import Call
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_api.model import PostedMessage
from tests.harness import provider_for, running_gateway, write_config

NAME = "team-slack"
DM = "D0DM00001"
GENERAL = "C0GENERAL"
ANSWER = "**Streaming** works: " + " ".join(f"word{i}" for i in range(30)) + "."


def slow(text: str, pieces: int = 15, delay: float = 0.1) -> Reply:
    size = max(1, len(text) // pieces)
    return Reply(chunks=[text[i : i + size] for i in range(0, len(text), size)], chunk_delay=delay)


def scripted(*replies: Reply) -> Callable[[dict[str, Any]], Reply]:
    queue = list(replies)
    return lambda body: queue.pop(0) if len(queue) > 1 else queue[0]


def mrkdwn(markdown: str) -> list[str]:
    return [chunk.text for chunk in render_markdown(markdown, "slack")]


def visible(slack: FakeSlack, channel: str) -> list[PostedMessage]:
    return [m for m in slack.state.posted.get(channel, ()) if not m.deleted]


@asynccontextmanager
async def slack_gateway(
    root: Path,
    model: FakeAnthropic,
    slack: FakeSlack,
    *,
    persona: dict[str, Any] | None = None,
    **channel: Any,
) -> AsyncIterator[Gateway]:
    settings = {
        "name": NAME,
        "type": "slack",
        "bot_token": slack.bot_token,
        "app_token": slack.app_token,
        "api_base_url": slack.base_url,
        **channel,
    }
    config = write_config(
        root,
        provider=provider_for(model),
        personas={"assistant": persona or {}},
        extra={"channels": [settings], "bindings": [{"channel": NAME, "persona": "assistant"}]},
    )
    before = slack.connections
    async with running_gateway(config) as gw:
        await slack.wait_for_connections(before + 1)
        yield gw


async def test_a_dm_reply_is_a_preview_edited_once_a_second_that_becomes_the_mrkdwn_reply(
    tmp_path: Path,
) -> None:
    async with FakeSlack() as slack, FakeAnthropic(responder=scripted(slow(ANSWER))) as model:
        async with slack_gateway(tmp_path, model, slack):
            await slack.inject_message(DM, "stream please")
            await wait_until(lambda: [m.text for m in visible(slack, DM)] == mrkdwn(ANSWER), timeout=15)
    [message] = visible(slack, DM)
    assert len(message.versions) >= 2 and all(v.endswith("writing…") for v in message.versions)
    assert "**Streaming**" in message.versions[-1]  # the preview is plain text
    times = [message.stream_times[0] if message.stream_times else 0.0, *message.edit_times][1:]
    assert min(b - a for a, b in itertools.pairwise(times)) >= 0.9  # about one edit a second


async def test_native_streaming_in_a_thread_streams_shows_the_tool_status_and_ends_as_the_reply(
    tmp_path: Path,
) -> None:
    first = Reply(text="Let me look.", tool_calls=[Call("list_directory", {"path": "/workspace"})])
    final = slow("The folder is **empty**, as far as I can see from here.", pieces=8, delay=0.15)
    final = Reply(chunks=final.chunks, chunk_delay=final.chunk_delay, delay=1.5)  # the tool's status shows
    async with FakeSlack() as slack, FakeAnthropic(responder=scripted(first, final)) as model:
        async with slack_gateway(
            tmp_path, model, slack, persona={"capabilities": ["fs.read:thread"]}, streaming="native"
        ):
            ts = await slack.inject_message(
                GENERAL, "what is in my folder?", channel_type="channel", mention=True
            )
            want = mrkdwn("The folder is **empty**, as far as I can see from here.")
            await wait_until(lambda: [m.text for m in visible(slack, GENERAL)] == want, timeout=15)
    [message] = visible(slack, GENERAL)
    assert message.thread_ts == ts and not message.streaming  # the stream was stopped
    assert len(message.stream_times) >= 2  # started, then appended as the model wrote
    assert message.edit_times, "the final rendering replaced the streamed text with chat.update"
    statuses = [
        status for channel, thread, status in slack.state.statuses if (channel, thread) == (GENERAL, ts)
    ]
    assert statuses[0] == "Reading a file…" and statuses[-1] == ""
