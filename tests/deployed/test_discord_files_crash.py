"""kill -9 while many files are being uploaded to Discord: no file reaches a channel twice,
every file that was not on the wire at the kill arrives with its bytes, and those that were
are reported ``unknown`` rather than uploaded again.

``talon run`` as deployed; the Discord stand-in in its own process answers every REST call
after 100-300 ms, answers a create that carries a file another 100-300 ms after the message
was created, and refuses 5 % of message creates (429 with Discord's headers, 502, 503),
which discord.py or the outbox retries. A file reaches a channel with its message. A
second upload of the same file with the same nonce would be answered with the first
message (as Discord does for a few minutes), so the stand-in also counts those: none may
happen.
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

CHANNEL = "team-discord"
CHATS = 6
FILES_PER_CHAT = 6
FIRST_ID = 910_000_000_000_000_000  # snowflake-sized ids, far from the fake's own
DMS = [str(FIRST_ID + c) for c in range(CHATS)]


async def test_kill_9_mid_upload_attaches_no_file_twice_and_loses_none(tmp_path: Path) -> None:
    digests = make_files(tmp_path / "data", CHATS, FILES_PER_CHAT)
    async with (
        fake_process(
            "tests.fakes.discord_api.standalone", tmp_path, "--latency", "0.1:0.3", "--fail-rate", "0.05"
        ) as discord,
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
                    "type": "discord",
                    "token": discord.info["token"],
                    "api_base_url": discord.url,
                    "gateway_url": discord.info["gateway_url"],
                }
            ],
        )
        allow_sending_files(tmp_path)
        asks = [
            {
                "channel_id": dm,
                "author_id": str(FIRST_ID + 1000 + c),
                "text": attach_request(c, FILES_PER_CHAT),
            }
            for c, dm in enumerate(DMS)
        ]
        outcome = await kill_mid_upload(
            config, discord.url, CHATS, lambda: post_json(f"{discord.url}/_fake/inject", {"messages": asks})
        )
        stats = await get_json(f"{discord.url}/_fake/stats")
    assert stats["refused_uploads"] > 0, f"the stand-in refused some uploads, which were retried: {stats}"
    # Discord answers a create repeating a recent nonce with the first message, which would
    # hide a second upload of a file for a few minutes; the outbox must not rely on it.
    assert stats["repeated_nonces"] == 0, "no file was uploaded again"
    check_exactly_once(outcome, digests, DMS, tmp_path / "data")
