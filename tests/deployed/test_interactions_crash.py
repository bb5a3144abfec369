"""kill -9 while a question and an approval wait for their taps: after the restart the same
prompts are still answerable, the taps resume both turns, the model is not asked again for what
it had already asked, and each chat gets exactly one reply.

``talon run`` is a subprocess; the Bot API stand-in and the model stand-in
(:mod:`tests.fakes.asking_model`, counting its calls) run in processes of their own.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    get_json,
    log_failures,
    post_json,
    write_deployed_config,
)

pytestmark = pytest.mark.timeout(240)

ASKER, GATER = 5101, 5102


async def _until(check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := await check()):
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.1)
    return value


async def _prompts(url: str) -> dict[str, list[str]] | None:
    buttons = (await get_json(f"{url}/_fake/callbacks"))["buttons"]
    ready = {k: v for k, v in buttons.items() if v}
    return ready if len(ready) == 2 else None


async def test_kill_9_while_a_question_and_an_approval_wait_then_taps_resume_both(tmp_path: Path) -> None:
    counts = tmp_path / "counts.json"
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.01:0.05") as bot_api,
        fake_process("tests.fakes.asking_model", tmp_path, "--counts", str(counts)) as model,
    ):
        channel = {
            "name": "team-telegram",
            "type": "telegram",
            "token": bot_api.info["token"],
            "api_base_url": bot_api.url,
            "streaming": "off",  # about the prompt and its answer, not previews (those: test_streaming_order.py)
        }
        config = write_deployed_config(
            tmp_path, model_url=model.url, model_kind="anthropic", channels=[channel]
        )
        persona_file = tmp_path / "personas" / "assistant" / "persona.yaml"
        persona = yaml.safe_load(persona_file.read_text())
        persona["capabilities"] = ["chat.ask", "state.write:persona"]
        persona["approvals"] = {"tools": ["state_put"], "approvers": "asker", "timeout": 600}
        persona_file.write_text(yaml.safe_dump(persona), encoding="utf-8")
        messages = [
            {"chat_id": ASKER, "text": "ask", "user_id": ASKER},
            {"chat_id": GATER, "text": "gate", "user_id": GATER},
        ]
        async with deployed_daemon(config) as daemon:
            await post_json(f"{bot_api.url}/_fake/inject", {"messages": messages})
            prompts = await _until(lambda: _prompts(bot_api.url), 60)
            await asyncio.sleep(0.5)  # let the prompts' message ids commit
            await daemon.kill()
        first_log = daemon.log()
        async with deployed_daemon(config):
            await asyncio.sleep(1.0)  # the re-leased turns wait again for the same prompts
            taps = {ASKER: "Yes", GATER: "Approve"}
            for key, labels in prompts.items():
                chat, message_id = (int(x) for x in key.split(":"))
                assert taps[chat] in labels
                await post_json(
                    f"{bot_api.url}/_fake/tap",
                    {"chat_id": chat, "message_id": message_id, "label": taps[chat], "user_id": chat},
                )

            async def replied() -> dict[str, list[str]] | None:
                sent = await get_json(f"{bot_api.url}/_fake/sent")
                done = all(len(sent.get(str(c), [])) >= 2 for c in (ASKER, GATER))
                return sent if done else None

            sent = await _until(replied, 60)
            await asyncio.sleep(1.0)  # nothing more arrives
            sent = await get_json(f"{bot_api.url}/_fake/sent")
            answers = (await get_json(f"{bot_api.url}/_fake/callbacks"))["answers"]
    asked, gated = sent[str(ASKER)], sent[str(GATER)]
    assert len(asked) == 2 and len(gated) == 2, (asked, gated)  # one prompt and one reply each
    assert asked[1] == 'answered: {"action": "answer", "content": {"value": true}}'
    assert gated[1] == 'answered: {"namespace": "ops", "key": "deploy", "scope": "persona", "version": 1}'
    assert sorted(answers.values()) == ["Got it: approved", "Got it: yes"]
    calls = json.loads(counts.read_text())
    assert calls == {"ask": 1, "gate": 1, "resumed": 2}  # not asked again after the restart
    assert not log_failures(first_log)


async def test_kill_9_while_the_prompt_is_posted_leaves_one_prompt_that_still_resumes_the_turn(
    tmp_path: Path,
) -> None:
    """The prompt's sendMessage reaches the chat but its answer never comes back; kill -9 then.
    After the restart the prompt is not posted again (it may or may not be there, and here it
    is); a tap on it resumes the turn and its buttons are removed from the message tapped."""
    counts = tmp_path / "counts.json"
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.01:0.05") as bot_api,
        fake_process("tests.fakes.asking_model", tmp_path, "--counts", str(counts)) as model,
    ):
        channel = {
            "name": "team-telegram",
            "type": "telegram",
            "token": bot_api.info["token"],
            "api_base_url": bot_api.url,
            "streaming": "off",
        }
        config = write_deployed_config(
            tmp_path, model_url=model.url, model_kind="anthropic", channels=[channel]
        )
        persona_file = tmp_path / "personas" / "assistant" / "persona.yaml"
        persona = yaml.safe_load(persona_file.read_text())
        persona["capabilities"] = ["chat.ask"]
        persona_file.write_text(yaml.safe_dump(persona), encoding="utf-8")
        await post_json(f"{bot_api.url}/_fake/hang", {"method": "sendMessage", "deliver": True})

        async def prompt() -> tuple[int, list[str]] | None:
            buttons = (await get_json(f"{bot_api.url}/_fake/callbacks"))["buttons"]
            shown = [(int(k.split(":")[1]), v) for k, v in buttons.items() if k.startswith(f"{ASKER}:") and v]
            return shown[0] if shown else None

        async with deployed_daemon(config) as daemon:
            await post_json(
                f"{bot_api.url}/_fake/inject",
                {"messages": [{"chat_id": ASKER, "text": "ask", "user_id": ASKER}]},
            )
            message_id, labels = await _until(prompt, 60)
            await daemon.kill()  # while sendMessage waits for an answer that never comes
        assert labels == ["Yes", "No"]
        async with deployed_daemon(config) as daemon:

            async def resumed_waiting() -> bool:
                return "not posting it again" in daemon.log()

            await _until(resumed_waiting, 30)
            await asyncio.sleep(1.0)  # the re-leased turn is waiting on the same prompt
            assert (await get_json(f"{bot_api.url}/_fake/sent"))[str(ASKER)] == ["❓ Ship it?"]
            await post_json(
                f"{bot_api.url}/_fake/tap",
                {"chat_id": ASKER, "message_id": message_id, "label": "Yes", "user_id": ASKER},
            )

            async def replied() -> list[str] | None:
                sent = (await get_json(f"{bot_api.url}/_fake/sent")).get(str(ASKER), [])
                return sent if len(sent) >= 2 else None

            await _until(replied, 60)

            async def closed() -> bool:
                return await prompt() is None

            await _until(closed, 30)
            await asyncio.sleep(1.0)  # nothing more arrives
            sent = (await get_json(f"{bot_api.url}/_fake/sent"))[str(ASKER)]
            answers = (await get_json(f"{bot_api.url}/_fake/callbacks"))["answers"]
            second_log = daemon.log()
    assert len(sent) == 2, sent  # one prompt, one reply
    assert sent[0].startswith("❓ Ship it?") and sent[0].endswith("✅ yes — User5101")
    assert sent[1] == 'answered: {"action": "answer", "content": {"value": true}}'
    assert list(answers.values()) == ["Got it: yes"]
    assert json.loads(counts.read_text()) == {"ask": 1, "resumed": 1}
    assert not log_failures(second_log)
