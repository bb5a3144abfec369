"""Questions on the console, through real turns: the fake model calls ask_question, the console
shows numbered choices, a reply by number resumes the turn, and the model sees the answer; the
turn holds no worker slot while it waits; a schedule-like run without a human is declined."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_results, write_config

ASK = Call("ask_question", {"question": "Which colour?", "type": "choice", "choices": ["red", "blue"]})


def _asker(body: dict[str, Any]) -> Reply:
    results = tool_results(body)
    if not results:
        return Reply(tool_calls=[ASK])
    return Reply(text=f"answer was {results[-1][1]}")


async def _message(inbox: asyncio.Queue[dict[str, Any]]) -> dict[str, Any]:
    while (item := await inbox.get()).get("type") != "message":
        pass
    return item


async def test_a_numbered_reply_answers_the_question_and_resumes_the_turn(tmp_path: Path) -> None:
    async with FakeAnthropic(responder=_asker) as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": ["chat.ask"]}},
            extra={"queue": {"workers": 1, "backoff_base": 0.05, "backoff_max": 0.2, "max_attempts": 3}},
        )
        async with running_gateway(config) as gw:
            console = gw.components.control.console(None)
            seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
            with console.attach("main", seen):
                turn = asyncio.create_task(say(gw, "paint it"))
                shown = await asyncio.wait_for(_message(seen), 30)
                assert shown["text"].splitlines()[:4] == ["❓ Which colour?", "", "1. red", "2. blue"]
                # The waiting turn holds no worker slot: another thread's turn runs meanwhile.
                fake.script(Reply(text="meanwhile"))
                other = await say(gw, "hello", thread="other")
                assert other.text == "meanwhile"
                wrong = await console.submit("main", "7")
                assert wrong.reply == "Please reply with the number of a choice, 1 to 2."
                answered = await console.submit("main", "2")
                assert answered.reply == "Got it: blue"
                done = await asyncio.wait_for(turn, 30)
    assert done.text == 'answer was {"action": "answer", "content": {"value": "blue"}}'
    assert len(fake.requests) == 3  # ask, the other thread's turn, the answer: no extra turn for "2" or "7"


async def test_bad_arguments_get_an_error_the_model_can_act_on(tmp_path: Path) -> None:
    bad = Call("ask_question", {"question": "Pick", "type": "choice", "choices": ["only one"]})
    steps = iter([Reply(tool_calls=[bad])])
    async with FakeAnthropic(
        responder=lambda body: next(steps, None) or Reply(text=json.dumps(tool_results(body)))
    ) as fake:
        config = write_config(
            tmp_path, provider=provider_for(fake), personas={"assistant": {"capabilities": ["chat.ask"]}}
        )
        async with running_gateway(config) as gw:
            turn = await say(gw, "ask me")
    [(is_error, text)] = json.loads(turn.text)
    assert is_error and text == "type choice needs choices: a list of 2 to 25 options"
