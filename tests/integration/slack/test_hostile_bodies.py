"""Slack events with hostile bodies: over HTTP a signed malformed, deeply nested or oversized
body gets a 4xx with a short JSON reason (an unsigned one still 401); over Socket Mode such
a message is skipped with a warning. Either way the next event reaches intake."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from urllib.parse import quote

import aiohttp
import pytest
from slack_sdk.signature import SignatureVerifier

from connectors.slack.socket import MAX_EVENT_BYTES
from tests.fakes.slack_api import FakeSlack
from tests.integration.slack.conftest import running

DEEP = "[" * 100_000 + "]" * 100_000
TOO_DEEP = {"error": "body must be JSON: JSON nested deeper than 64 levels"}


async def _post(url: str, body: str, secret: str, content_type: str = "application/json") -> tuple[int, str]:
    """POST ``body`` signed with ``secret`` as Slack signs a request."""
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
        or "",
    }
    async with aiohttp.ClientSession() as session:
        async with session.post(url, data=body.encode(), headers=headers) as resp:
            return resp.status, await resp.text()


async def test_signed_hostile_bodies_get_400_and_the_next_event_is_served(
    fake: FakeSlack, files_dir: Path
) -> None:
    http = {"app_token": None, "signing_secret": fake.signing_secret, "http_port": 0}
    async with running(fake, files_dir, **http) as (connector, recorder):
        url, secret = connector.events_url, fake.signing_secret
        assert url is not None
        form = "application/x-www-form-urlencoded"
        answers = [
            await _post(url, "{not json", secret),
            await _post(url, DEEP, secret),
            await _post(url, '{"a":' * 100_000, secret, content_type="text/plain"),
            await _post(url, "payload=" + quote(DEEP), secret, content_type=form),
            await _post(url, "[1, 2]", secret),
            await _post(url, '"' + "x" * MAX_EVENT_BYTES + '"', secret),
            await _post(url, DEEP, "not-the-signing-secret"),
        ]
        await fake.inject_message("D0DM00001", "still here")
        [event] = await recorder.wait_for(1)
    statuses = [status for status, _ in answers]
    assert statuses == [400, 400, 400, 400, 400, 413, 401]
    bodies = [json.loads(body) for _, body in answers[:5]] + [answers[6][1]]
    assert bodies[0]["error"].startswith("body must be JSON: not JSON (Expecting property name")
    assert bodies[1:4] == [TOO_DEEP] * 3
    assert bodies[4] == {"error": "body must be a JSON object"}
    assert bodies[5] == '{"error": "invalid request"}'
    assert event.text == "still here"
    assert [e.event_id for e in recorder.attempts] == [event.event_id]


async def test_hostile_socket_mode_messages_are_skipped_with_a_warning(
    fake: FakeSlack, files_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="talon.slack")
    async with running(fake, files_dir) as (_, recorder):
        await fake.send_raw("{not json")
        await fake.send_raw('{"a":' * 100_000)
        await fake.send_raw('{"envelope_id": "' + "x" * MAX_EVENT_BYTES + '"}')
        await fake.inject_message("D0DM00001", "still here")
        [event] = await recorder.wait_for(1)
        await fake.wait_for_acks(1)
    assert event.text == "still here"
    assert fake.connections == 1  # the same connection carried on
    warnings = [r.getMessage() for r in caplog.records if r.name == "talon.slack.socket"]
    assert warnings[0].startswith("skipped a Socket Mode message: not JSON (Expecting property name")
    assert warnings[1:] == [
        "skipped a Socket Mode message: JSON nested deeper than 64 levels",
        f"skipped a Socket Mode message: JSON text longer than {MAX_EVENT_BYTES} bytes",
    ]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
