"""Slack under a burst, as deployed: nothing lost, nothing doubled, logs that never fail.

``talon run`` runs with its default log level (and Slack's default pacing, one message a
second per channel) against a Slack stand-in in another process: Socket Mode events in,
every Web API call answered after 50-200 ms, 2 % of ``chat.postMessage`` refused (429
``ratelimited``, 503 ``service_unavailable``), and events not acknowledged within 3 s
delivered again as Slack does. The model is an OpenAI-compatible echo in a third process.
Thirty users each write ten messages into their DM, in ten rounds half a second apart.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    get_json,
    inject_rounds,
    log_failures,
    outbox_rows,
    unaccounted,
    wait_for_answers,
    write_deployed_config,
)
from tests.deployed.test_telegram_burst import answered

pytestmark = pytest.mark.timeout(300)

CHANNELS = 30
PER_CHANNEL = 10
# Rounds arrive this far apart: chats are still busy when the next message comes, so each
# gets several replies (and pacing has work to do) instead of one answer to everything.
GAP = 0.5


def _dm(c: int) -> str:
    return f"D0BURST{c:03d}"


def _rounds(channels: int, per_channel: int) -> list[list[dict[str, str]]]:
    """Round ``n`` brings message ``n`` of every user, each in their DM with the bot."""
    return [
        [
            {"channel": _dm(c), "user": f"U0USER{c:03d}", "text": f"channel {c} message {n}"}
            for c in range(channels)
        ]
        for n in range(per_channel)
    ]


async def test_a_burst_over_30_slack_dms_answers_every_dm_once(tmp_path: Path) -> None:
    async with (
        fake_process(
            "tests.fakes.slack_api.standalone",
            tmp_path,
            "--latency",
            "0.05:0.2",
            "--fail-rate",
            "0.02",
            "--redeliver-after",
            "3",
        ) as slack,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model,
    ):
        config = write_deployed_config(
            tmp_path,
            model_url=model.url,
            channels=[
                {
                    "name": "team-slack",
                    "type": "slack",
                    "bot_token": slack.info["bot_token"],
                    "app_token": slack.info["app_token"],
                    "api_base_url": slack.url,
                }
            ],
        )
        async with deployed_daemon(config) as daemon:
            await inject_rounds(slack.url, _rounds(CHANNELS, PER_CHANNEL), GAP)
            last = {_dm(c): f"channel {c} message {PER_CHANNEL - 1}" for c in range(CHANNELS)}
            await wait_for_answers(slack.url, last, answered, timeout=180)
            assert await daemon.stop() == 0
        # What each DM shows once the daemon is done (deleted previews left out).
        sent = await get_json(f"{slack.url}/_fake/sent")
        stats = await get_json(f"{slack.url}/_fake/stats")
    # Refusals depend only on the seed (1, the default) and the order of posts: the 14th is
    # refused, so any run that answers all 30 DMs has met at least one.
    assert sum(stats["refused"].values()) > 0, f"the stand-in refused some posts: {stats}"
    for channel, texts in sent.items():
        doubled = [t for t, n in Counter(texts).items() if n > 1]
        assert not doubled, f"{channel} got {doubled} more than once"
    rows = outbox_rows(tmp_path / "data")
    statuses = Counter(r["status"] for r in rows)
    assert set(statuses) == {"sent"}, statuses
    assert unaccounted(sent, rows) == {}
    assert log_failures(daemon.log()) == []
