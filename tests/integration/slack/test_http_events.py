"""Slack connector on the HTTP Events API: signed requests from the fake, Slack's retries."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.base import ConnectorStartError, ThreadKey
from tests.fakes.slack_api import FakeSlack
from tests.integration.slack.conftest import Recorder, make_connector, running


def _http(fake: FakeSlack) -> dict[str, object]:
    return {"app_token": None, "signing_secret": fake.signing_secret, "http_port": 0}


async def test_signed_events_reach_intake_and_get_200(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir, **_http(fake)) as (connector, recorder):
        assert connector.events_url is not None
        assert connector.events_url.startswith("http://127.0.0.1:")
        assert connector.events_url.endswith("/slack/events")
        ts = await fake.inject_message("C0GENERAL", "hello", channel_type="channel", mention=True)
        [event] = recorder.events  # the request returned only after intake committed
    assert event.thread_key == ThreadKey("team-slack", "C0GENERAL", ts)
    assert event.needs_reply is True
    assert all(e.acked for e in fake.envelopes) and len(fake.envelopes) == 2
    assert fake.connections == 0  # no Socket Mode in HTTP mode


async def test_bad_signature_is_rejected(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir, **_http(fake)) as (_, recorder):
        payload = fake.event_callback(
            {
                "type": "message",
                "channel": "D0DM00001",
                "user": "U0HUMAN01",
                "text": "forged",
                "ts": "1.000001",
                "channel_type": "im",
            }
        )
        status, _ = await fake.post_event(payload, secret="not-the-signing-secret")
    assert status == 401
    assert recorder.attempts == []


async def test_url_verification_challenge(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir, **_http(fake)) as (_, _recorder):
        status, body = await fake.post_event(
            {
                "token": "x",
                "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                "type": "url_verification",
            }
        )
    assert status == 200
    assert "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" in body


async def test_slack_retry_of_the_same_event_is_one_turn(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir, **_http(fake)) as (_, recorder):
        payload = fake.event_callback(
            {
                "type": "message",
                "channel": "D0DM00001",
                "user": "U0HUMAN01",
                "text": "once",
                "ts": "1700000000.000001",
                "channel_type": "im",
            }
        )
        first = await fake.post_event(payload)
        retry = await fake.post_event(payload, retry_num=1)
    assert (first[0], retry[0]) == (200, 200)
    assert [e.event_id for e in recorder.attempts] == ["D0DM00001:1700000000.000001"]


async def test_failed_intake_answers_500_and_the_retry_commits(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir, **_http(fake)) as (_, recorder):
        recorder.failures = 1
        await fake.inject_message("D0DM00001", "please keep", user="U0HUMAN01")
        [envelope] = fake.envelopes
        assert not envelope.acked and recorder.events == []
        await fake.redeliver_unacked()
    assert envelope.acked and envelope.attempts == 2
    [event] = recorder.events
    assert event.event_id == recorder.attempts[0].event_id


async def test_unhandled_event_types_are_acknowledged(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir, **_http(fake)) as (_, recorder):
        envelope = await fake.inject_event({"type": "channel_created", "channel": {"id": "C0NEW"}})
        status, _ = await fake.post_event({"type": "event_callback", "event": {"no": "type"}})
    assert envelope.acked
    assert status < 500
    assert recorder.attempts == []


async def test_http_mode_without_signing_secret_refuses_to_start(fake: FakeSlack, files_dir: Path) -> None:
    connector = make_connector(fake, files_dir, app_token=None, http_port=0)
    with pytest.raises(ConnectorStartError, match="SLACK_SIGNING_SECRET"):
        await connector.start(Recorder())
    assert connector.events_url is None


async def test_port_in_use_is_a_clear_start_error(fake: FakeSlack, files_dir: Path) -> None:
    async with running(fake, files_dir, **_http(fake)) as (first, _):
        port = int(first.events_url.rsplit(":", 1)[1].split("/")[0])  # type: ignore[union-attr]
        second = make_connector(
            fake, files_dir, app_token=None, signing_secret=fake.signing_secret, http_port=port
        )
        with pytest.raises(ConnectorStartError, match=f"cannot listen on 127.0.0.1:{port}"):
            await second.start(Recorder())
