"""kill -9 while many files are being uploaded to Slack: no file reaches a channel twice,
every file that was not on the wire at the kill arrives with its bytes, and those that were
are reported ``unknown`` rather than uploaded again.

``talon run`` as deployed, with Slack's default pacing; the Slack stand-in in its own
process answers every call after 100-300 ms, answers ``files.completeUploadExternal``
another 100-300 ms after the file showed in the channel, and refuses 5 % of the upload
steps and posts (429 ``ratelimited``, 503 ``service_unavailable``), which the outbox
retries. A file reaches a channel only once ``files.completeUploadExternal`` shared it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deployed.files_crash import (
    allow_sending_files,
    attach_request,
    check_exactly_once,
    kill_mid_upload,
    make_files,
)
from tests.deployed.support import fake_process, get_json, post_json, write_deployed_config

pytestmark = pytest.mark.timeout(180)

CHANNEL = "team-slack"
CHATS = 6
FILES_PER_CHAT = 6
DMS = [f"D0FILES{c:03d}" for c in range(CHATS)]


async def test_kill_9_mid_upload_shares_no_file_twice_and_loses_none(tmp_path: Path) -> None:
    digests = make_files(tmp_path / "data", CHATS, FILES_PER_CHAT)
    async with (
        fake_process(
            "tests.fakes.slack_api.standalone", tmp_path, "--latency", "0.1:0.3", "--fail-rate", "0.05"
        ) as slack,
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
                    "type": "slack",
                    "bot_token": slack.info["bot_token"],
                    "app_token": slack.info["app_token"],
                    "api_base_url": slack.url,
                }
            ],
        )
        allow_sending_files(tmp_path)
        asks = [
            {"channel": dm, "user": f"U0FILES{c:03d}", "text": attach_request(c, FILES_PER_CHAT)}
            for c, dm in enumerate(DMS)
        ]
        outcome = await kill_mid_upload(
            config, slack.url, CHATS, lambda: post_json(f"{slack.url}/_fake/inject", {"messages": asks})
        )
        stats = await get_json(f"{slack.url}/_fake/stats")
    refused = {method: n for method, n in stats["refused_calls"].items() if method != "chat.postMessage"}
    assert refused, f"the stand-in refused some upload steps, which were retried: {stats}"
    check_exactly_once(outcome, digests, DMS, tmp_path / "data")
