"""Every record the daemon emits at DEBUG goes through the real formatters without failing.

A logging call that breaks (a reserved ``extra`` key, an unformattable argument) does so
only at a level that is enabled, usually on an error path; running the failure-heavy
paths at DEBUG, in both output formats, makes every such call happen.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    log_failures,
    post_json,
    write_deployed_config,
)
from tests.deployed.test_telegram_burst import _burst, _wait_for_last_answers

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("fmt", ["text", "json"])
async def test_debug_logs_of_a_failing_burst_are_all_written(tmp_path: Path, fmt: str) -> None:
    async with (
        fake_process(
            "tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.01:0.05", "--fail-rate", "0.3"
        ) as bot_api,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model,
    ):
        config = write_deployed_config(
            tmp_path,
            model_url=model.url,
            log_level="debug",
            channels=[
                {
                    "name": "team-telegram",
                    "type": "telegram",
                    "token": bot_api.info["token"],
                    "api_base_url": bot_api.url,
                    "poll_timeout": 1,
                }
            ],
        )
        async with deployed_daemon(config, "--log-format", fmt) as daemon:
            await post_json(f"{bot_api.url}/_fake/inject", {"messages": _burst(20, 3)})
            await _wait_for_last_answers(bot_api.url, range(1000, 1020), 2, 120)
            assert await daemon.stop() == 0
            log = daemon.log()
    assert "retrying" in log, "the refused sends were logged"
    assert log_failures(log) == []
    if fmt == "json":
        records = [json.loads(line) for line in log.splitlines() if line.strip()]
        assert {r["level"] for r in records} >= {"debug", "info"}
