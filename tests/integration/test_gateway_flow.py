"""The spine end to end in one process: console message -> pipeline -> queue -> model
(stand-in API) -> outbox -> console delivery."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from connectors.base import InboundEvent, IntakeStatus, Sender, ThreadKey
from tests.fakes.model_api import Error, FakeAnthropic, FakeOpenAI, Reply, echo_responder
from tests.fakes.model_script import last_user_text
from tests.harness import provider_for, running_gateway, say, write_config
from tests.store_helpers import fetch_row, fetch_rows


async def _model_called(fake: FakeAnthropic, times: int = 1) -> None:
    async with asyncio.timeout(30):
        while len(fake.requests) < times:
            await asyncio.sleep(0.01)


async def test_console_message_gets_the_model_reply(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            turn = await say(gw, "hello there")
        assert turn.status == "completed"
        assert turn.text == "echo: hello there"
        # The persona's system prompt, the channel list and the time reach the model.
        system = fake.requests[0]["system"]
        system_text = system if isinstance(system, str) else " ".join(b["text"] for b in system)
        assert (
            "You are assistant." in system_text and "console" in system_text and "Current time" in system_text
        )


async def test_openai_compatible_provider_works_the_same(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        config = write_config(tmp_path, provider=provider_for(fake, "openai"))
        async with running_gateway(config) as gw:
            turn = await say(gw, "ping")
        assert turn.text == "echo: ping"


async def test_the_transcript_carries_the_conversation(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            await say(gw, "my name is Ada")
            await say(gw, "what is my name?")
        roles = [
            (m["role"], m["content"] if isinstance(m["content"], str) else m["content"][0]["text"])
            for m in fake.requests[1]["messages"]
        ]
        assert roles == [
            ("user", "my name is Ada"),
            ("assistant", "echo: my name is Ada"),
            ("user", "what is my name?"),
        ]


async def test_redelivered_event_produces_one_message_and_one_turn(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            first = await say(gw, "once", event_id="evt-1")
            again = await gw.components.control.console(None).submit("main", "once", event_id="evt-1")
            assert again.status is IntakeStatus.DUPLICATE
            await asyncio.sleep(0.2)
            rows = await fetch_rows(
                gw.components.db, "SELECT role FROM messages WHERE thread_id = ?", (first.intake.thread_id,)
            )
        assert [r["role"] for r in rows] == ["user", "assistant"]
        assert len(fake.requests) == 1


async def test_messages_arriving_while_busy_join_the_next_turn(tmp_path: Path) -> None:
    def slow_first(body: dict) -> Reply:
        text = last_user_text(body)
        return Reply(text=f"echo: {text}", delay=0.5 if text == "first" else 0)

    async with FakeAnthropic(responder=slow_first) as fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            console = gw.components.control.console(None)
            first = asyncio.create_task(say(gw, "first"))
            await _model_called(fake)  # the first turn is now waiting on the model
            second = await console.submit("main", "second")
            third = asyncio.create_task(say(gw, "third"))
            await first
            turn3 = await third
        assert second.status is IntakeStatus.ACCEPTED
        assert len(fake.requests) == 2  # "second" and "third" were answered in one turn
        assert last_user_text(fake.requests[1]) == "second\n\nthird"
        assert turn3.text == "echo: second\n\nthird"


async def test_threads_run_in_parallel(tmp_path: Path) -> None:
    arrived: list[float] = []

    def slow(body: dict) -> Reply:
        arrived.append(time.monotonic())
        return Reply(text=f"echo: {last_user_text(body)}", delay=2.0)

    async with FakeAnthropic(responder=slow) as fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            turns = await asyncio.gather(*(say(gw, f"hi {i}", thread=f"t{i}") for i in range(6)))
        assert [t.text for t in turns] == [f"echo: hi {i}" for i in range(6)]
        # All six model calls began before the first (2 s) one could have answered.
        assert max(arrived) - min(arrived) < 2.0


async def test_stop_cancels_the_running_turn_and_says_so(tmp_path: Path) -> None:
    async with FakeAnthropic(responder=lambda b: Reply(text="too late", delay=5)) as fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            long_turn = asyncio.create_task(say(gw, "write a novel"))
            await _model_called(fake)
            stop = await gw.components.control.console(None).submit("main", "/stop")
            turn = await long_turn
            status = await fetch_row(
                gw.components.db,
                "SELECT status FROM queue_items WHERE message_id = ?",
                (turn.intake.message_id,),
            )
        assert stop.status is IntakeStatus.STORED
        assert turn.status == "canceled"
        assert turn.text == "Stopped."
        assert status["status"] == "canceled"


async def test_transient_failures_retry_then_dead_letter_with_an_apology(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        fake.script(Error(503), Error(503), Error(503))
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            turn = await say(gw, "are you there?")
            status = await gw.components.status.report()
        assert turn.status == "failed"
        assert "couldn't answer" in turn.text
        assert len(fake.requests) == 3  # max_attempts in the test config
        assert status.dead_letters[0].thread_id == turn.intake.thread_id


async def test_a_transient_failure_then_success_delivers_one_reply(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        fake.script(Error(529))
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            turn = await say(gw, "hello")
        assert turn.status == "completed" and turn.texts == ["echo: hello"]


async def test_new_starts_a_fresh_context(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            await say(gw, "remember 42")
            await gw.components.control.console(None).submit("main", "/new")
            await say(gw, "what number?")
        assert [m["role"] for m in fake.requests[-1]["messages"]] == ["user"]


async def test_unbound_chat_is_stored_without_a_turn(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            extra={
                "channels": [{"name": "console", "type": "console"}, {"name": "other", "type": "console"}],
            },
        )
        async with running_gateway(config) as gw:
            event = InboundEvent("other", "e1", ThreadKey("other", "x"), "dm", Sender("u", "U"), "hi")
            result = await gw.components.intake(event)
        assert result.status is IntakeStatus.UNROUTED
        assert fake.requests == []


async def test_group_chatter_not_addressed_to_the_bot_is_context_only(tmp_path: Path) -> None:
    async with FakeAnthropic(responder=echo_responder) as fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake))) as gw:
            event = InboundEvent(
                "console",
                "g1",
                ThreadKey("console", "main"),
                "group",
                Sender("u", "Bob"),
                "lunch at noon",
                needs_reply=False,
            )
            assert (await gw.components.intake(event)).status is IntakeStatus.STORED
            turn = await say(gw, "when is lunch?")
        assert "lunch at noon" in last_user_text(fake.requests[0])
        assert len(fake.requests) == 1 and turn.status == "completed"
