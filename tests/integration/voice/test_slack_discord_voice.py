"""Voice through the Slack and Discord stand-ins: a Slack audio clip (MP3) and a Discord voice
message (flags 8192, OGG/Opus) are downloaded by slack-sdk and discord.py, heard by the audio
stand-in and answered with the transcript in the model's context; the reply is also spoken,
once, as an uploaded OGG/Opus file (Slack) or attachment (Discord). An AIFF recording, a format
the endpoint does not take, is converted by ffmpeg before it is sent."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tests.fakes.audio_api import FakeAudioAPI
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.model_api import FakeAnthropic
from tests.fakes.slack_api import FakeSlack
from tests.fakes.voice_maker import voice_note
from tests.harness import running_gateway
from tests.integration.voice.support import AUDIO, NO_PACING, Model, voice_config, wait_until

SAID = "Move the release to Friday"
DM = "D0VOICE01"
IS_VOICE_MESSAGE = 1 << 13
WAIT = 30.0


def _slack_channel(fake: FakeSlack) -> dict[str, Any]:
    return {
        "name": "team-slack",
        "type": "slack",
        "bot_token": fake.bot_token,
        "app_token": fake.app_token,
        "api_base_url": fake.base_url,
        "pacing": NO_PACING,
    }


def _discord_channel(fake: FakeDiscord) -> dict[str, Any]:
    return {
        "name": "team-discord",
        "type": "discord",
        "token": fake.token,
        "api_base_url": fake.api_base_url,
        "gateway_url": fake.gateway_url,
    }


SPEECH = {"provider": AUDIO, "voice": "alloy"}


async def test_a_slack_audio_clip_is_heard_answered_and_the_reply_uploaded_as_audio(tmp_path: Path) -> None:
    model = Model()
    clip = voice_note(SAID, container="mp3")
    async with FakeSlack() as slack, FakeAnthropic(responder=model) as fake, FakeAudioAPI() as audio:
        config = voice_config(
            tmp_path,
            fake,
            audio,
            channel=_slack_channel(slack),
            transcription={"provider": AUDIO},
            speech=SPEECH,
        )
        async with running_gateway(config):
            await slack.wait_for_connections(1, timeout=WAIT)
            meta = slack.add_file("audio_message.mp3", clip, mimetype="audio/mpeg")
            await slack.inject_message(DM, "", channel_type="im", files=[meta])
            posted = await slack.wait_for_posted(DM, 1, timeout=WAIT)
            uploads = await wait_until(lambda: slack.uploads(DM), timeout=WAIT)
    assert [p.text for p in posted] == ["Booked: " + SAID]
    assert "; transcript:]\n" + SAID in model.texts[0]
    [heard] = audio.transcriptions
    assert heard["filename"] == "audio_message.mp3" and heard["size"] == len(clip)  # sent as it came
    [spoken] = uploads
    assert spoken.name == "reply.ogg" and spoken.size > 0
    assert len(audio.speeches) == 1


async def test_a_discord_voice_message_is_heard_and_the_reply_attached_once(tmp_path: Path) -> None:
    model = Model()
    note = voice_note(SAID)
    async with FakeDiscord() as discord, FakeAnthropic(responder=model) as fake, FakeAudioAPI() as audio:
        config = voice_config(
            tmp_path,
            fake,
            audio,
            channel=_discord_channel(discord),
            transcription={"provider": AUDIO},
            speech=SPEECH,
        )
        async with running_gateway(config):
            await discord.wait_for_ready(timeout=WAIT)
            upload = discord.add_file("voice-message.ogg", note, content_type="audio/ogg")
            upload.update({"duration_secs": 1.5, "waveform": "AAAA"})
            discord.inject_message(
                discord.dm_channel_id,
                "",
                author_id=discord.user_id,
                guild=False,
                attachments=[upload],
                flags=IS_VOICE_MESSAGE,
            )
            sent = await discord.wait_for_sent(discord.dm_channel_id, 2, timeout=WAIT)
    reply, voice = sent
    assert reply["content"] == "Booked: " + SAID
    assert [f["filename"] for f in voice["files"]] == ["reply.ogg"] and voice["content"] == ""
    assert "; transcript:]\n" + SAID in model.texts[0]
    assert [t["heard"] for t in audio.transcriptions] == [SAID]
    assert len(audio.speeches) == 1


async def test_an_audio_format_the_endpoint_refuses_is_converted_first(tmp_path: Path) -> None:
    model = Model()
    recording = voice_note(SAID, container="aiff")
    async with FakeDiscord() as discord, FakeAnthropic(responder=model) as fake, FakeAudioAPI() as audio:
        config = voice_config(
            tmp_path, fake, audio, channel=_discord_channel(discord), transcription={"provider": AUDIO}
        )
        async with running_gateway(config):
            await discord.wait_for_ready(timeout=WAIT)
            upload = discord.add_file("memo.aiff", recording, content_type="audio/aiff")
            discord.inject_message(
                discord.dm_channel_id,
                "the memo",
                author_id=discord.user_id,
                guild=False,
                attachments=[upload],
            )
            await discord.wait_for_sent(discord.dm_channel_id, 1, timeout=WAIT)
    [heard] = audio.transcriptions
    assert heard["filename"] == "memo.ogg" and heard["heard"] == SAID
    assert heard["sha256"] != hashlib.sha256(recording).hexdigest() and heard["size"] < len(recording)
    assert "the memo" in model.texts[0] and "; transcript:]\n" + SAID in model.texts[0]
