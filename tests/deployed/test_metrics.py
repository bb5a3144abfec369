"""/metrics of a deployed ``talon run`` after a scripted Telegram conversation, parsed with
prometheus-client's own parser: the counts match what the chats saw."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    post_json,
    wait_for_answers,
    write_deployed_config,
)

pytestmark = pytest.mark.timeout(180)

TOKEN = "scrape-token-0123456789"
CHATS = (501, 502, 503)


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_metrics_count_a_scripted_conversation(tmp_path: Path) -> None:
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path) as bot_api,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model,
    ):
        channel = {
            "name": "tg",
            "type": "telegram",
            "token": bot_api.info["token"],
            "api_base_url": bot_api.url,
        }
        config = write_deployed_config(
            tmp_path,
            model_url=model.url,
            channels=[channel],
            http={"listen": "127.0.0.1:0", "metrics_token": TOKEN},
        )
        async with deployed_daemon(config) as daemon:
            url = (tmp_path / "data" / "http.url").read_text().strip()
            for round_ in (1, 2):  # one turn at a time per chat: two rounds, six turns
                messages = [{"chat_id": c, "user_id": c, "text": f"round {round_} in {c}"} for c in CHATS]
                await post_json(f"{bot_api.url}/_fake/inject", {"messages": messages})
                await wait_for_answers(
                    bot_api.url,
                    {str(c): f"round {round_} in {c}" for c in CHATS},
                    lambda texts, q: any(q in t for t in texts),
                    60,
                )
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{url}/metrics") as resp:
                    assert resp.status == 401
                    assert "talon_" not in await resp.text()
                async with session.get(
                    f"{url}/metrics", headers={"Authorization": "Bearer wrong-token-0123456789"}
                ) as resp:
                    assert resp.status == 401
                # A turn and a send are counted as they end, a moment after the reply reached the chat.
                deadline = time.monotonic() + 10
                while True:
                    async with session.get(
                        f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
                    ) as resp:
                        assert resp.status == 200
                        assert resp.headers["X-Content-Type-Options"] == "nosniff"
                        samples = _samples(await resp.text())
                    ended = _value(samples, "talon_turns_total", persona="assistant", outcome="completed")
                    sent = _value(samples, "talon_outbox_sends_total", channel="tg", outcome="sent")
                    if min(ended, sent) >= 6 or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.1)
            assert await daemon.stop() == 0

    assert _value(samples, "talon_intake_events_total", channel="tg", outcome="accepted") == 6
    assert _value(samples, "talon_intake_events_total", channel="tg", outcome="duplicate") == 0
    assert _value(samples, "talon_turns_total", persona="assistant", outcome="completed") == 6
    assert _value(samples, "talon_turns_total", persona="assistant", outcome="dead") == 0
    assert _value(samples, "talon_turn_duration_seconds_count", persona="assistant") == 6
    assert _value(samples, "talon_model_calls_total", model="test-model", outcome="ok") == 6
    assert _value(samples, "talon_model_call_duration_seconds_count", model="test-model") == 6
    assert _value(samples, "talon_outbox_sends_total", channel="tg", outcome="sent") == 6
    assert _value(samples, "talon_outbox_send_duration_seconds_count", channel="tg") == 6
    assert (
        _value(samples, "talon_tokens_total", persona="assistant", model="local:test-model", kind="output")
        > 0
    )
    assert _value(samples, "talon_channel_up", channel="tg") == 1
    assert _value(samples, "talon_queue_items", status="pending") == 0
    assert _value(samples, "talon_outbox_rows", status="unknown") == 0
    assert _value(samples, "talon_dead_letters") == 0
    used = _value(samples, "talon_budget_used_tokens", scope="persona", subject="assistant", period="day")
    assert used > 0
    assert TOKEN not in (tmp_path / "daemon.log").read_text()
