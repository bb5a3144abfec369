"""Questions and approvals on Telegram through real turns: python-telegram-bot against the Bot API
stand-in. A question's inline keyboard is tapped, the turn resumes and the model sees the answer,
the keyboard is gone and a second tap is answered "Already answered"; an approval-gated tool runs
after Approve, is refused after Deny and after its timeout, and every step is in the audit log."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.harness import provider_for, running_gateway, tool_results, write_config
from tests.store_helpers import fetch_rows

CHAT = 4242
NO_PACING = {"per_second": 0, "per_chat_per_second": 0, "group_per_minute": 0}


def _config(tmp_path: Path, fake: FakeAnthropic, telegram: FakeTelegramAPI, persona: dict[str, Any]) -> Path:
    channel = {
        "name": "tg",
        "type": "telegram",
        "token": telegram.token,
        "api_base_url": telegram.url,
        "pacing": NO_PACING,
        "streaming": "off",  # the chat shows only the prompt and the reply
    }
    return write_config(
        tmp_path,
        provider=provider_for(fake),
        personas={"assistant": persona},
        extra={"channels": [channel], "bindings": [{"channel": "tg", "persona": "assistant"}]},
    )


def _script(first: Call) -> Callable[[dict[str, Any]], Reply]:
    def respond(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[first])
        return Reply(text=f"result: {results[-1][1]}")

    return respond


async def _until(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    async with asyncio.timeout(timeout):
        while not (value := check()):
            await asyncio.sleep(0.02)
    return value


async def test_a_tap_answers_the_question_once_and_the_keyboard_goes(tmp_path: Path) -> None:
    ask = Call("ask_question", {"question": "Ship it?", "type": "confirm"})
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=_script(ask)) as fake:
        async with running_gateway(_config(tmp_path, fake, telegram, {"capabilities": ["chat.ask"]})):
            telegram.inject_message(CHAT, "ship?", user_id=CHAT)
            [prompt] = await telegram.wait_for_sent(CHAT, 1, timeout=30)
            assert prompt.text == "❓ Ship it?"
            assert [b["text"] for b in telegram.callbacks.buttons(CHAT, prompt.message_id)] == ["Yes", "No"]
            data = telegram.callbacks.buttons(CHAT, prompt.message_id)[0]["callback_data"]
            assert len(data.encode()) <= 64
            first = telegram.callbacks.tap(CHAT, prompt.message_id, "Yes", user_id=CHAT)
            sent = await telegram.wait_for_sent(CHAT, 2, timeout=30)
            await _until(lambda: not telegram.callbacks.buttons(CHAT, prompt.message_id))
            # A second tap from a client that still shows the old keyboard is refused.
            second = telegram.callbacks.tap_data(CHAT, prompt.message_id, data, user_id=CHAT)
            await _until(lambda: second in telegram.callbacks.answers)
    assert sent[1].text == 'result: {"action": "answer", "content": {"value": true}}'
    assert telegram.callbacks.answers[first]["text"] == "Got it: yes"
    assert telegram.callbacks.answers[second]["text"] == "Already answered."
    assert telegram.sent_messages(CHAT)[0].text.endswith("✅ yes — User4242")
    assert len(fake.requests) == 2  # the taps started no turn of their own
    assert len(telegram.sent_messages(CHAT)) == 2


GATED = {"capabilities": ["chat.ask", "state.write:persona", "state.read:persona"]}
PUT = Call("state_put", {"namespace": "ops", "key": "deploy", "value": {"go": True}})


async def _approval_run(
    tmp_path: Path, persona: dict[str, Any], tap: str | None
) -> tuple[str, list[Any], Any]:
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=_script(PUT)) as fake:
        async with running_gateway(_config(tmp_path, fake, telegram, persona)) as gw:
            telegram.inject_message(CHAT, "deploy", user_id=CHAT)
            [request] = await telegram.wait_for_sent(CHAT, 1, timeout=30)
            if tap is not None:
                labels = [b["text"] for b in telegram.callbacks.buttons(CHAT, request.message_id)]
                assert labels == ["Approve", "Deny", "Always in this thread"]
                telegram.callbacks.tap(CHAT, request.message_id, tap, user_id=CHAT)
            sent = await telegram.wait_for_sent(CHAT, 2, timeout=30)
            await gw.components.host_tools.bridge.audit.flush()
            audit = await fetch_rows(
                gw.components.db,
                "SELECT decision, status, detail FROM audit_log WHERE tool = 'state_put' ORDER BY id",
            )
            doc = await fetch_rows(gw.components.db, "SELECT value FROM state_documents")
    return request.text + "\n---\n" + sent[1].text, [tuple(r) for r in audit], doc


async def test_an_approved_call_runs_and_is_audited(tmp_path: Path) -> None:
    persona = {**GATED, "approvals": {"tools": ["state_put"], "approvers": "asker", "timeout": 60}}
    text, audit, doc = await _approval_run(tmp_path, persona, "Approve")
    assert text.startswith("🔐 Approval needed: state_put (asked by 4242)\n• namespace: ops\n• key: deploy")
    assert '"version": 1' in text.split("---")[1]
    assert [a[:2] for a in audit] == [
        ("approval", None),
        ("approval", "ok"),
        ("allowed", None),
        ("result", "ok"),
    ]
    assert audit[1][2] == "approved by 4242"
    assert len(doc) == 1


async def test_a_denied_call_is_refused_and_never_runs(tmp_path: Path) -> None:
    persona = {**GATED, "approvals": {"labels": ["state.write"], "timeout": 60}}
    text, audit, doc = await _approval_run(tmp_path, persona, "Deny")
    assert "state_put was denied by the approver; it was not run" in text.split("---")[1]
    assert [a[:2] for a in audit] == [("approval", None), ("approval", "error")]
    assert doc == []


async def test_an_unanswered_approval_fails_closed(tmp_path: Path) -> None:
    persona = {**GATED, "approvals": {"tools": ["state_put"], "timeout": 1}}
    text, audit, doc = await _approval_run(tmp_path, persona, None)
    assert "state_put was not approved within 1 seconds; it was not run" in text.split("---")[1]
    assert [a[:2] for a in audit] == [("approval", None), ("approval", "timeout")]
    assert doc == []
    assert json.loads(json.dumps(audit[1][2])) == "refused: approval timed out"


async def test_multi_choice_toggles_survive_a_restart_and_submit_answers_with_them(tmp_path: Path) -> None:
    ask = Call(
        "ask_question",
        {
            "question": "Which?",
            "type": "multi_choice",
            "choices": ["red", "green", "blue"],
            "allow_skip": True,
        },
    )
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=_script(ask)) as fake:
        config = _config(tmp_path, fake, telegram, {"capabilities": ["chat.ask"]})

        def labels(message_id: int) -> list[str]:
            return [b["text"] for b in telegram.callbacks.buttons(CHAT, message_id)]

        async def tap(message_id: int, label: str) -> dict[str, Any]:
            query = telegram.callbacks.tap(CHAT, message_id, label, user_id=CHAT)
            await _until(lambda: query in telegram.callbacks.answers)
            return telegram.callbacks.answers[query]

        async with running_gateway(config):
            telegram.inject_message(CHAT, "pick", user_id=CHAT)
            [prompt] = await telegram.wait_for_sent(CHAT, 1, timeout=30)
            mid = prompt.message_id
            assert labels(mid) == ["☐ red", "☐ green", "☐ blue", "Submit", "Skip"]
            assert all(len(b["callback_data"].encode()) <= 64 for b in telegram.callbacks.buttons(CHAT, mid))
            assert (await tap(mid, "Submit"))["text"] == "Pick at least one choice, then tap Submit."
            assert (await tap(mid, "☐ blue"))["text"] == "Selected: blue"
            assert (await tap(mid, "☐ red"))["text"] == "Selected: red, blue"
            assert labels(mid)[:3] == ["☑ red", "☐ green", "☑ blue"]
            stranger = telegram.callbacks.tap(CHAT, mid, "☐ green", user_id=CHAT + 1)
            await _until(lambda: stranger in telegram.callbacks.answers)
        assert (
            telegram.callbacks.answers[stranger]["text"] == "Only the person it was asked of may answer this."
        )
        async with running_gateway(config):  # the selection is in the store, not in this process
            assert (await tap(mid, "☑ red"))["text"] == "Selected: blue"
            assert (await tap(mid, "☐ green"))["text"] == "Selected: green, blue"
            assert (await tap(mid, "Submit"))["text"] == "Got it: green, blue"
            sent = await telegram.wait_for_sent(CHAT, 2, timeout=30)
            await _until(lambda: not telegram.callbacks.buttons(CHAT, mid))
    assert sent[1].text == 'result: {"action": "answer", "content": {"value": ["green", "blue"]}}'
    assert telegram.sent_messages(CHAT)[0].text.endswith("✅ green, blue — User4242")
    assert len(telegram.sent_messages(CHAT)) == 2
