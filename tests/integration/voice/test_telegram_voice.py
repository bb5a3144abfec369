"""Voice notes through the Telegram stand-in: a real OGG/Opus note (espeak-ng + ffmpeg) is
downloaded by python-telegram-bot, heard by the audio stand-in and answered, the fake model
seeing the transcript; echo posts "Heard: …"; the reply is also spoken, once, with sendVoice.
Without transcription, or with an endpoint that keeps failing, the sender is told and the
persona still gets the note."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.fakes.audio_api import FakeAudioAPI
from tests.fakes.model_api import FakeAnthropic
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.fakes.voice_maker import voice_note
from tests.harness import running_gateway
from tests.integration.voice.support import (
    AUDIO,
    CHAT,
    Model,
    telegram_channel,
    voice_config,
    wait_until,
)
from tests.store_helpers import fetch_rows

SAID = "Please book the small meeting room for Tuesday at ten"


async def test_a_voice_note_is_transcribed_answered_echoed_and_the_reply_spoken_once(tmp_path: Path) -> None:
    note = voice_note(SAID)
    model = Model()
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=model) as fake, FakeAudioAPI() as audio:
        config = voice_config(
            tmp_path,
            fake,
            audio,
            channel=telegram_channel(telegram),
            transcription={"provider": AUDIO, "model": "whisper-1", "language": "en", "echo": True},
            speech={"provider": AUDIO, "model": "tts-1", "voice": "nova"},
        )
        async with running_gateway(config) as gw:
            telegram.inject_message(CHAT, "", user_id=CHAT, voice=note)
            await telegram.wait_for_sent(CHAT, 2, timeout=30)
            await wait_until(lambda: telegram.files_received(CHAT), timeout=30)
            rows = await fetch_rows(
                gw.components.db, "SELECT id, thread_id, attachments FROM messages WHERE role = 'user'"
            )

    # The model saw the transcript as the message, marked as a voice note, with the file's path.
    [row] = rows
    seen = model.texts[0]
    assert f"[voice note /workspace/inbox/{row['id']}/" in seen and "; transcript:]\n" + SAID in seen
    # The endpoint got the note as Telegram sent it (no conversion), with the model and language.
    [heard] = audio.transcriptions
    assert (heard["model"], heard["language"], heard["size"]) == ("whisper-1", "en", len(note))
    # The sender saw "Heard: …" first, then the reply, then one voice message (no text).
    texts = [m.text for m in telegram.sent_messages(CHAT)]
    assert texts == [f"Heard: “{SAID}”", "Booked: " + SAID, ""]
    [spoken] = telegram.files_received(CHAT)
    assert spoken.method == "sendVoice" and spoken.name == "reply.ogg"
    assert [s["input"] for s in audio.speeches] == ["Booked: " + SAID]
    assert audio.speeches[0]["voice"] == "nova"
    # The audio stays in the thread's workspace, and the transcript on the message.
    [entry] = json.loads(row["attachments"])
    assert entry["transcript"] == SAID and entry["mime_type"] == "audio/ogg"
    workspace = tmp_path / "data" / "workspaces" / "assistant" / "threads" / str(row["thread_id"])
    assert (workspace / entry["path"].removeprefix("/workspace/")).read_bytes() == note


async def test_without_transcription_the_sender_is_told_and_the_persona_still_gets_the_note(
    tmp_path: Path,
) -> None:
    model = Model()
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=model) as fake, FakeAudioAPI() as audio:
        config = voice_config(tmp_path, fake, audio, channel=telegram_channel(telegram))
        async with running_gateway(config):
            telegram.inject_message(CHAT, "listen to this", user_id=CHAT, voice=voice_note(SAID))
            sent = await telegram.wait_for_sent(CHAT, 2, timeout=30)
    notice, reply = (m.text for m in sent)
    assert "could not listen to it (transcription is not set up here)" in notice
    assert "please type what you said" in notice
    seen = model.texts[0]
    assert (
        "listen to this" in seen and "transcription is not configured" in seen and "/workspace/inbox/" in seen
    )
    assert reply.startswith("Booked: ")  # answered anyway
    assert audio.transcriptions == [] and audio.speeches == []
    assert telegram.files_received(CHAT) == []  # no speech configured: text only


async def test_a_failing_endpoint_gives_the_notice_after_bounded_retries(tmp_path: Path) -> None:
    model = Model()
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=model) as fake, FakeAudioAPI() as audio:
        audio.fail_next("transcriptions", 10, status=503)
        config = voice_config(
            tmp_path,
            fake,
            audio,
            channel=telegram_channel(telegram),
            transcription={"provider": AUDIO, "max_attempts": 3, "timeout": 20},
        )
        async with running_gateway(config) as gw:
            telegram.inject_message(CHAT, "", user_id=CHAT, voice=voice_note(SAID))
            sent = await telegram.wait_for_sent(CHAT, 2, timeout=30)
            [row] = await fetch_rows(gw.components.db, "SELECT attachments FROM messages WHERE role = 'user'")
    assert len(audio.transcriptions) == 3  # three attempts, then the notice
    notice = sent[0].text
    assert "could not listen to it" in notice and "503" in notice
    assert "not transcribed" in model.texts[0]
    [entry] = json.loads(row["attachments"])
    assert "transcript" not in entry and entry["transcript_note"].startswith("not transcribed")


async def test_speech_that_fails_leaves_the_reply_as_text_only(tmp_path: Path) -> None:
    model = Model()
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=model) as fake, FakeAudioAPI() as audio:
        audio.fail_next("speech", 10, status=500)
        config = voice_config(
            tmp_path,
            fake,
            audio,
            channel=telegram_channel(telegram),
            transcription={"provider": AUDIO},
            speech={"provider": AUDIO, "speak": "all", "timeout": 10},
        )
        async with running_gateway(config):
            telegram.inject_message(CHAT, "", user_id=CHAT, voice=voice_note(SAID))
            sent = await telegram.wait_for_sent(CHAT, 1, timeout=30)
            await asyncio.sleep(0.5)  # a voice message would follow the text by now
    assert [m.text for m in sent] == ["Booked: " + SAID]
    assert len(audio.speeches) == 2  # two tries, then text only
    assert telegram.files_received(CHAT) == []


async def test_a_personas_own_speech_wins_over_the_top_level_voice(tmp_path: Path) -> None:
    model = Model()
    async with FakeTelegramAPI() as telegram, FakeAnthropic(responder=model) as fake, FakeAudioAPI() as audio:
        config = voice_config(
            tmp_path,
            fake,
            audio,
            channel=telegram_channel(telegram),
            speech={"provider": AUDIO, "voice": "nova"},  # voice notes only, in nova
        )
        persona = tmp_path / "personas" / "assistant" / "persona.yaml"
        persona.write_text(
            persona.read_text() + f"speech: {{provider: {AUDIO}, voice: onyx, speak: all}}\n",
            encoding="utf-8",
        )
        async with running_gateway(config):
            telegram.inject_message(CHAT, "book a table", user_id=CHAT)
            await wait_until(lambda: telegram.files_received(CHAT), timeout=30)
    # A typed message is spoken too (the persona says speak: all), in the persona's voice.
    [spoken] = telegram.files_received(CHAT)
    assert spoken.method == "sendVoice"
    [speech] = audio.speeches
    assert speech["voice"] == "onyx" and speech["input"].startswith("Booked:")
