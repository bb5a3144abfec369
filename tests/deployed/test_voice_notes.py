"""A voice note as deployed: ``talon run`` as a subprocess, the Bot API, the model and the audio
stand-ins each in a process of their own. The note (espeak-ng + ffmpeg, OGG/Opus) is heard and
echoed; ``kill -9`` lands after the transcript was stored and while the model is still
answering; after the restart the turn runs again without transcribing again or echoing twice,
and the reply arrives once, as text and as one voice message."""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
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
from tests.fakes.voice_maker import have_voice_tools, voice_note

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not have_voice_tools(), reason="needs ffmpeg and espeak-ng"),
]

CHANNEL = "team-telegram"
CHAT = "8801"
SAID = "Remind the team about the demo on Thursday"


def _heard_messages(data_dir: Path) -> list[dict[str, Any]]:
    db = data_dir / "talon.db"
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT attachments FROM messages WHERE role = 'user' AND attachments IS NOT NULL"
        )
        return [e for (a,) in rows for e in json.loads(a) if "transcript" in e]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


async def test_a_voice_note_is_heard_once_and_answered_once_across_a_kill_9(tmp_path: Path) -> None:
    note = voice_note(SAID)
    async with (
        fake_process("tests.fakes.telegram_api.standalone", tmp_path, "--latency", "0.02:0.08") as bot_api,
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai", "--delay", "4") as model,
        fake_process("tests.fakes.audio_api", tmp_path, "--latency", "0.1") as audio,
    ):
        config = write_deployed_config(
            tmp_path,
            model_url=model.url,
            channels=[
                {
                    "name": CHANNEL,
                    "type": "telegram",
                    "token": bot_api.info["token"],
                    "api_base_url": bot_api.url,
                }
            ],
            transcription={"provider": "audio", "echo": True},
            speech={"provider": "audio", "voice": "alloy"},
        )
        audio_provider = {
            "type": "openai",
            "base_url": audio.info["base_url"],
            "api_key": audio.info["api_key"],
        }
        settings = yaml.safe_load(config.read_text())
        settings["providers"]["audio"] = audio_provider
        config.write_text(yaml.safe_dump(settings))
        message = {"chat_id": CHAT, "user_id": CHAT, "text": "", "voice_b64": base64.b64encode(note).decode()}

        async with deployed_daemon(config) as daemon:
            await post_json(f"{bot_api.url}/_fake/inject", {"messages": [message]})
            async with asyncio.timeout(60):
                while not _heard_messages(tmp_path / "data"):
                    await asyncio.sleep(0.05)
                # The echo delivered first: a kill while it is in flight leaves it unknown, by design.
                while not any(
                    t.startswith("Heard:")
                    for t in (await get_json(f"{bot_api.url}/_fake/sent")).get(CHAT, [])
                ):
                    await asyncio.sleep(0.05)
            await daemon.kill()  # the model is still thinking (it answers after 4 s)
            first_log = daemon.log()
        sent_at_kill = (await get_json(f"{bot_api.url}/_fake/sent")).get(CHAT, [])
        assert not any(t.startswith("echo:") for t in sent_at_kill), "the kill came before the answer"

        async with deployed_daemon(config) as daemon:
            deadline = time.monotonic() + 60
            while True:
                sent = (await get_json(f"{bot_api.url}/_fake/sent")).get(CHAT, [])
                files = [f for f in await get_json(f"{bot_api.url}/_fake/files") if f["chat_id"] == CHAT]
                if any(t.startswith("echo:") for t in sent) and files:
                    break
                assert time.monotonic() < deadline, f"no answer after the restart: {sent}"
                await asyncio.sleep(0.3)
            await asyncio.sleep(1.0)  # anything sent twice would arrive by now
            sent = (await get_json(f"{bot_api.url}/_fake/sent")).get(CHAT, [])
            files = [f for f in await get_json(f"{bot_api.url}/_fake/files") if f["chat_id"] == CHAT]
            assert await daemon.stop() == 0
            second_log = daemon.log()
        asked = await get_json(f"{audio.url}/_fake/requests")

    assert [t["heard"] for t in asked["transcriptions"]] == [SAID], "transcribed once, before the kill"
    echoes = [t for t in sent if t.startswith("Heard:")]
    answers = [t for t in sent if t.startswith("echo:")]
    assert echoes == [f"Heard: “{SAID}”"], "echoed once"
    assert len(answers) == 1 and SAID in answers[0], "answered once, with the transcript"
    assert [(f["method"], f["name"]) for f in files] == [("sendVoice", "reply.ogg")], "spoken once"
    assert len(asked["speeches"]) == 1
    assert log_failures(first_log) == [] and log_failures(second_log) == []
    assert "audio-test-key" not in first_log + second_log
