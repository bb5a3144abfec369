"""Webhook mode: Telegram posts updates to the connector's own HTTP endpoint."""

from __future__ import annotations

import socket
from pathlib import Path

import aiohttp
import pytest

from connectors.base import ConnectorStartError
from connectors.telegram import TelegramConnector
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.integration.telegram.conftest import (
    FAST,
    RecordingIntake,
    StartConnector,
    make_settings,
    wait_until,
)

SECRET = "s3cret-Token_1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def webhook_options(port: int) -> dict[str, object]:
    return {
        "webhook_url": f"http://127.0.0.1:{port}/telegram/hook",
        "webhook_secret": SECRET,
        "webhook_listen": "127.0.0.1",
        "webhook_port": port,
    }


@pytest.mark.parametrize("secret", [None, "", "has spaces"])
async def test_webhook_without_a_usable_secret_refuses_to_start(
    fake: FakeTelegramAPI, files_dir: Path, secret: str | None
):
    options = {**webhook_options(free_port()), "webhook_secret": secret}
    connector = TelegramConnector(make_settings(fake, **options), files_dir=files_dir, tuning=FAST)

    with pytest.raises(ConnectorStartError, match="webhook_secret"):
        await connector.start(RecordingIntake())
    assert fake.calls == []  # refused before talking to Telegram


async def test_webhook_delivers_and_is_acknowledged_only_after_intake(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    port = free_port()
    intake = RecordingIntake(fail_times=1)
    connector, _ = await start_connector(intake, **webhook_options(port))
    [hook] = fake.calls_to("setWebhook")
    assert hook["url"] == f"http://127.0.0.1:{port}/telegram/hook"
    assert hook["secret_token"] == SECRET
    assert fake.calls_to("getUpdates") == []

    update_id = fake.inject_message(-100777, "@talon_test_bot hi", user_id=1, chat_type="supergroup")
    [event] = await intake.wait_for(1)
    await wait_until(lambda: not fake.pending_update_ids())

    assert event.event_id == str(update_id) and event.needs_reply
    assert fake.webhook_attempts == [(update_id, 500), (update_id, 200)]
    assert connector.health.state == "connected"


async def test_webhook_rejects_requests_without_the_secret(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    port = free_port()
    _, intake = await start_connector(**webhook_options(port))
    update = {
        "update_id": 1,
        "message": {"message_id": 1, "date": 0, "chat": {"id": 5, "type": "private"}, "text": "forged"},
    }
    url = f"http://127.0.0.1:{port}/telegram/hook"

    async with aiohttp.ClientSession() as session:
        async with session.post(url, json=update) as missing:
            missing_status = missing.status
        headers = {"X-Telegram-Bot-Api-Secret-Token": "guess"}
        async with session.post(url, json=update, headers=headers) as wrong:
            wrong_status = wrong.status
        headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
        async with session.post(url, data=b"not json", headers=headers) as garbage:
            garbage_status = garbage.status

    assert (missing_status, wrong_status, garbage_status) == (403, 403, 400)
    assert intake.calls == 0


async def test_webhook_port_in_use_is_a_start_error(fake: FakeTelegramAPI, files_dir: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        connector = TelegramConnector(
            make_settings(fake, **webhook_options(port)), files_dir=files_dir, tuning=FAST
        )

        with pytest.raises(ConnectorStartError, match="cannot listen for the webhook"):
            await connector.start(RecordingIntake())
