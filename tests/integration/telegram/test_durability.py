"""Telegram is acknowledged only after intake committed; the receive loop survives trouble."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from telegram import Bot

from connectors.base import ConnectorStartError
from connectors.telegram import TelegramConnector
from connectors.telegram.api import TelegramBot
from connectors.telegram.files import DOWNLOADS_AT_ONCE
from connectors.telegram.polling import Poller
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.integration.telegram.conftest import (
    CHANNEL,
    FAST,
    HealthLog,
    RecordingIntake,
    StartConnector,
    make_settings,
    wait_until,
)


async def test_intake_failure_means_redelivery_of_the_same_event(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    intake = RecordingIntake(fail_times=1)
    await start_connector(intake)
    update_id = fake.inject_message(42, "remember me", user_id=42)

    [event] = await intake.wait_for(1)
    await wait_until(lambda: not fake.pending_update_ids())

    assert intake.calls == 2
    assert event.event_id == str(update_id)
    offsets = [p.get("offset") for p in fake.calls_to("getUpdates")]
    assert offsets.count(update_id + 1) >= 1  # confirmed only after the successful intake


async def test_later_updates_wait_behind_a_failing_one(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    intake = RecordingIntake(fail_times=2)
    await start_connector(intake)
    first = fake.inject_message(42, "one", user_id=42)
    second = fake.inject_message(42, "two", user_id=42)

    events = await intake.wait_for(2)

    assert [e.event_id for e in events] == [str(first), str(second)]


async def test_crash_during_intake_leaves_the_update_unacknowledged(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    stuck = RecordingIntake()
    stuck.block = asyncio.Event()
    first, _ = await start_connector(stuck)
    update_id = fake.inject_message(42, "in flight", user_id=42)
    await stuck.wait_for_calls(1)

    await first.stop()  # the process dies while committing
    _, intake = await start_connector()

    [event] = await intake.wait_for(1)
    assert event.event_id == str(update_id)
    assert stuck.events == []


async def test_malformed_update_is_skipped_and_the_loop_keeps_going(
    fake: FakeTelegramAPI, start_connector: StartConnector, caplog: pytest.LogCaptureFixture
):
    _, intake = await start_connector()
    with caplog.at_level(logging.WARNING, logger="talon.connectors.telegram"):
        bad_one = fake.inject_update({"message": {"message_id": "not-a-number", "chat": "nope"}})
        bad_two = fake.inject_update({"message": "garbage"})
        good = fake.inject_message(42, "still here", user_id=42)

        [event] = await intake.wait_for(1)
        await wait_until(lambda: not fake.pending_update_ids())

    assert event.event_id == str(good)
    assert intake.calls == 1
    skipped = [r.getMessage() for r in caplog.records if "malformed" in r.getMessage()]
    assert any(str(bad_one) in m for m in skipped) and any(str(bad_two) in m for m in skipped)
    assert fake.token not in caplog.text


async def test_bad_token_refuses_to_start_with_a_clear_message(fake: FakeTelegramAPI, files_dir: Path):
    settings = make_settings(fake, token="7000001:wrong-token-value")
    connector = TelegramConnector(settings, files_dir=files_dir, tuning=FAST)

    with pytest.raises(ConnectorStartError) as info:
        await connector.start(RecordingIntake())

    message = str(info.value)
    assert message.startswith("team-telegram:")
    assert "token" in message and "BotFather" in message
    assert "wrong-token-value" not in message
    assert connector.health.state == "failed"
    assert fake.calls_to("getUpdates") == []


async def test_unreachable_api_refuses_to_start(files_dir: Path):
    async with FakeTelegramAPI() as gone:
        settings = make_settings(gone)
    connector = TelegramConnector(settings, files_dir=files_dir, tuning=FAST)

    with pytest.raises(ConnectorStartError, match="cannot reach the Telegram Bot API"):
        await connector.start(RecordingIntake())


async def test_reconnects_after_the_connection_drops(fake: FakeTelegramAPI, start_connector: StartConnector):
    connector, intake = await start_connector()
    await fake.wait_for_call("getUpdates")
    await asyncio.sleep(0.05)  # the long poll is now open

    fake.drop_connections()
    update_id = fake.inject_message(42, "after the outage", user_id=42)

    [event] = await intake.wait_for(1, timeout=5)
    assert event.event_id == str(update_id)
    health = connector.health
    assert isinstance(health, HealthLog)
    reconnecting = [detail for state, detail in health.history if state == "reconnecting"]
    assert reconnecting and "getUpdates failed" in reconnecting[0]
    assert health.states()[-1] == "connected"


async def test_server_errors_are_retried_with_backoff(fake: FakeTelegramAPI, start_connector: StartConnector):
    fake.fail_next("getUpdates", 502, "Bad Gateway", times=3)
    connector, intake = await start_connector()
    fake.inject_message(42, "eventually", user_id=42)

    await intake.wait_for(1)

    assert len(fake.calls_to("getUpdates")) >= 4
    assert connector.health.state == "connected"


async def test_flood_control_on_polling_waits_as_told(fake: FakeTelegramAPI, start_connector: StartConnector):
    fake.fail_next("getUpdates", 429, "Too Many Requests: retry after 1", retry_after=1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    _, intake = await start_connector()
    fake.inject_message(42, "patience", user_id=42)

    await intake.wait_for(1, timeout=5)

    assert loop.time() - started >= 0.9


async def test_conflict_with_another_poller_is_reported(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    description = (
        "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
    )
    fake.fail_next("getUpdates", 409, description, times=2)
    connector, intake = await start_connector()
    fake.inject_message(42, "after the conflict", user_id=42)

    await intake.wait_for(1)

    health = connector.health
    assert isinstance(health, HealthLog)
    assert any(s == "reconnecting" and "another process is polling" in d for s, d in health.history)
    assert health.states()[-1] == "connected"


async def test_watchdog_rebuilds_a_silent_poller(fake: FakeTelegramAPI, start_connector: StartConnector):
    # The HTTP read timeout (20 s + poll) would take far longer than this test allows:
    # only the watchdog can bring the poller back in time.
    tuning = dataclasses.replace(FAST, read_timeout=20.0)
    fake.hang_next("getUpdates")
    _, intake = await start_connector(tuning=tuning, poll_timeout=1, watchdog_seconds=0.5)
    await fake.wait_for_call("getUpdates")
    update_id = fake.inject_message(42, "are you there?", user_id=42)

    [event] = await intake.wait_for(1, timeout=4)

    assert event.event_id == str(update_id)


async def test_polling_removes_a_leftover_webhook(fake: FakeTelegramAPI, start_connector: StartConnector):
    async with Bot(fake.token, base_url=fake.base_url) as earlier_deployment:
        await earlier_deployment.set_webhook("http://127.0.0.1:9/hook")
    fake.fail_next("deleteWebhook", 500, "Internal Server Error")
    _, intake = await start_connector()
    fake.inject_message(42, "polling works", user_id=42)

    await intake.wait_for(1)
    assert len(fake.calls_to("deleteWebhook")) >= 2


async def test_stop_is_idempotent_and_ends_polling(fake: FakeTelegramAPI, start_connector: StartConnector):
    connector, intake = await start_connector()
    await fake.wait_for_call("getUpdates")
    await connector.stop()
    await connector.stop()
    calls = len(fake.calls_to("getUpdates"))
    fake.inject_message(42, "nobody home", user_id=42)
    await asyncio.sleep(0.2)

    assert connector.health.state == "stopped"
    assert len(fake.calls_to("getUpdates")) == calls
    assert intake.events == []


async def test_stop_ends_polling_even_when_it_lands_as_a_poll_answer_arrives(fake: FakeTelegramAPI):
    """A stop that comes in the same loop turn as a getUpdates answer (a daemon shutting down
    while updates flow) still ends the poll loop at once instead of leaving stop() waiting."""
    stopping: list[asyncio.Task[None]] = []

    class StopsAsThePollReturns(TelegramBot):
        async def get_raw_updates(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
            updates = await super().get_raw_updates(*args, **kwargs)
            if not stopping:
                stopping.append(asyncio.create_task(poller.stop()))
            return updates

    async def handle(raw: dict[str, Any]) -> None:
        pass

    poller = Poller(
        name=CHANNEL,
        make_bot=lambda: StopsAsThePollReturns(fake.token, base_url=fake.base_url),
        handle=handle,
        health=HealthLog(),
        poll_timeout=1,
        watchdog_seconds=30.0,
        tuning=FAST,
    )
    fake.inject_message(42, "as the daemon stops", user_id=42)  # the first poll answers at once
    poller.start()
    await wait_until(lambda: bool(stopping))
    done, _ = await asyncio.wait(stopping, timeout=3)
    polls = len(fake.calls_to("getUpdates"))
    await asyncio.sleep(0.2)
    later_polls = len(fake.calls_to("getUpdates")) - polls
    # A poll loop that outlived stop() is ended here, so the test fails instead of hanging.
    for task in asyncio.all_tasks():
        while task.get_name() == f"telegram poller {CHANNEL}" and not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=0.5)

    assert done, f"stop() still waiting after 3 s; {polls} getUpdates calls so far"
    assert (polls, later_polls) == (1, 0), "no poll after the one stop() landed on"


async def test_the_token_never_reaches_the_logs(
    fake: FakeTelegramAPI, start_connector: StartConnector, caplog: pytest.LogCaptureFixture
):
    with caplog.at_level(logging.DEBUG):
        connector, intake = await start_connector()
        fake.inject_message(42, "hi", user_id=42, document=("a.txt", b"abc"))
        await intake.wait_for(1)
        await connector.stop()

    assert fake.token not in caplog.text
    assert "/bot<token>/getUpdates" in caplog.text  # the HTTP client did log its URLs


class HeldChat(RecordingIntake):
    """An intake whose calls for one chat wait until ``release`` is set; the first
    ``fail_times`` calls for that chat raise."""

    def __init__(self, chat_id: str, *, fail_times: int = 0) -> None:
        super().__init__()
        self.chat_id = chat_id
        self.release = asyncio.Event()
        self.held_failures = fail_times
        self.seen: list[str] = []  # every event id intake was handed, in call order

    async def __call__(self, event: Any) -> Any:
        self.seen.append(event.event_id)
        if event.thread_key.chat_id == self.chat_id:
            await self.release.wait()
            if self.held_failures > 0:
                self.held_failures -= 1
                raise RuntimeError("database is locked")
        return await super().__call__(event)


async def test_a_chat_whose_intake_is_slow_holds_up_no_other_chat(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    intake = HeldChat("42")
    await start_connector(intake)
    slow = fake.inject_message(42, "one", user_id=42)
    later = fake.inject_message(42, "two", user_id=42)
    other = [fake.inject_message(7 + n, f"other {n}", user_id=7) for n in range(3)]

    committed = await intake.wait_for(3)  # while chat 42's first update is still in intake
    assert sorted(int(e.event_id) for e in committed) == other
    assert str(later) not in intake.seen  # a chat's updates stay in order
    assert fake.pending_update_ids()  # nothing acknowledged past the one in intake

    intake.release.set()
    events = await intake.wait_for(5)
    await wait_until(lambda: not fake.pending_update_ids())
    assert [e.event_id for e in events[3:]] == [str(slow), str(later)]


async def test_a_failed_chat_is_fetched_again_and_the_other_chats_are_not_lost(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    intake = HeldChat("42", fail_times=1)
    await start_connector(intake)
    failing = fake.inject_message(42, "one", user_id=42)
    other = fake.inject_message(7, "other", user_id=7)
    await intake.wait_for(1)
    intake.release.set()

    await intake.wait_for(3)
    await wait_until(lambda: not fake.pending_update_ids())

    # The other chat's update was committed, then delivered again with the failed one (the
    # gateway's intake drops such duplicates by event id); the failed one committed on its retry.
    assert Counter(e.event_id for e in intake.events) == {str(other): 2, str(failing): 1}
    assert intake.seen.count(str(failing)) == 2


async def test_a_batch_of_chats_with_files_downloads_a_few_at_a_time(
    fake: FakeTelegramAPI, start_connector: StartConnector
):
    # Chats are taken in side by side, and each download is held in memory until written:
    # a burst of files must not hold a whole batch of them at once.
    fake.download_gate = asyncio.Event()
    intake = RecordingIntake()
    await start_connector(intake)
    for chat in range(10):
        fake.inject_message(100 + chat, "", user_id=7, document=(f"f{chat}.bin", b"x" * 2000))

    await wait_until(lambda: fake.downloads_in_flight == DOWNLOADS_AT_ONCE)
    await asyncio.sleep(0.2)  # had the limit not held, the other downloads would have started
    assert fake.most_downloads_in_flight == DOWNLOADS_AT_ONCE
    fake.download_gate.set()

    events = await intake.wait_for(10)
    assert sorted(a.name for e in events for a in e.attachments) == sorted(
        f"f{chat}.bin" for chat in range(10)
    )
    assert fake.most_downloads_in_flight == DOWNLOADS_AT_ONCE
