"""Voice audio handling: ffmpeg bounded in time, output and environment; OGG durations read
without a process; which files are audio; what is sent to the transcription endpoint; how much
of a reply is spoken; the audio settings' checks."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from gateway.config import load_settings
from gateway.errors import ConfigError
from gateway.voice import ffmpeg
from gateway.voice.audio_files import is_audio, ready_for_transcription
from gateway.voice.ffmpeg import AudioToolError, duration_of, run_tool, to_ogg_opus
from gateway.voice.ogg import is_ogg_opus, ogg_duration
from gateway.voice.speaking import REST_IS_WRITTEN, spoken_text
from gateway.voice_settings import TranscriptionSettings
from tests.fakes.voice_maker import have_voice_tools, voice_note

needs_ffmpeg = pytest.mark.skipif(not have_voice_tools(), reason="needs ffmpeg and espeak-ng")


@needs_ffmpeg
async def test_ffmpeg_that_runs_too_long_is_killed_with_a_clear_error() -> None:
    args = ["-hide_banner", "-re", "-f", "lavfi", "-i", "anullsrc", "-t", "600", "-f", "null", "-"]
    with pytest.raises(AudioToolError, match=r"took longer than 0\.5 s"):
        await run_tool("ffmpeg", args, timeout=0.5)


@needs_ffmpeg
async def test_ffmpeg_output_past_the_cap_is_cut_off() -> None:
    args = ["-hide_banner", "-f", "lavfi", "-i", "anullsrc", "-t", "600", "-f", "s16le", "pipe:1"]
    with pytest.raises(AudioToolError, match="over 100,000 bytes"):
        await run_tool("ffmpeg", args, limit=100_000)


async def test_the_child_environment_holds_only_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TALON_TEST_SECRET", "do-not-leak-me")
    out = await run_tool("env", [])  # what any child of run_tool sees
    assert out.decode().split() == [f"PATH={ffmpeg._ENV['PATH']}"]


def test_a_missing_ffmpeg_is_named_with_its_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ffmpeg._ENV, "PATH", "/nonexistent")
    assert ffmpeg.ffmpeg_missing() == (
        "ffmpeg and ffprobe not found on PATH; install it (Debian: apt-get install ffmpeg)"
    )


@needs_ffmpeg
async def test_ogg_duration_matches_ffprobe_without_a_process(tmp_path: Path) -> None:
    path = tmp_path / "note.ogg"
    path.write_bytes(voice_note("one two three four five"))
    assert is_ogg_opus(path.read_bytes())
    read = ogg_duration(path)
    assert read is not None and abs(read - await duration_of(path)) < 0.05


def test_ogg_duration_of_garbage_or_a_cut_file_is_none(tmp_path: Path) -> None:
    (tmp_path / "a.ogg").write_bytes(b"not an ogg file at all")
    (tmp_path / "b.ogg").write_bytes(b"OggS")
    assert ogg_duration(tmp_path / "a.ogg") is None and ogg_duration(tmp_path / "b.ogg") is None
    assert ogg_duration(tmp_path / "missing.ogg") is None


@pytest.mark.parametrize(
    ("entry", "audio"),
    [
        ({"name": "voice_1.ogg", "mime_type": "audio/ogg"}, True),
        ({"name": "clip.m4a", "mime_type": "audio/mp4"}, True),
        ({"name": "memo.aiff", "mime_type": None}, True),
        ({"name": "voice-message.ogg", "mime_type": "application/octet-stream"}, True),
        ({"name": "report.pdf", "mime_type": "application/pdf"}, False),
        ({"name": "movie.mp4", "mime_type": "video/mp4"}, False),
        ({"name": "photo.jpg", "mime_type": "image/jpeg"}, False),
    ],
)
def test_which_attachments_are_audio(entry: dict[str, str | None], audio: bool) -> None:
    assert is_audio(entry) is audio


@needs_ffmpeg
async def test_a_voice_note_within_the_caps_is_sent_as_it_came(tmp_path: Path) -> None:
    path = tmp_path / "voice.ogg"
    path.write_bytes(voice_note("short and sweet"))
    ready = await ready_for_transcription(path, "voice.ogg", TranscriptionSettings(provider="audio"))
    assert (ready.data, ready.filename, ready.mime, ready.converted) == (
        path.read_bytes(),
        "voice.ogg",
        "audio/ogg",
        False,
    )


@needs_ffmpeg
async def test_a_note_over_max_seconds_is_cut_to_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "long.ogg"
    path.write_bytes(voice_note("this sentence takes a good few seconds to say out loud"))
    settings = TranscriptionSettings(provider="audio", max_seconds=1.0)
    ready = await ready_for_transcription(path, "long.ogg", settings)
    assert ready.converted and ready.cut_at == 1.0 and ready.seconds > 2
    cut = tmp_path / "cut.ogg"
    cut.write_bytes(ready.data)
    assert abs((ogg_duration(cut) or 0) - 1.0) < 0.1


@needs_ffmpeg
async def test_a_file_that_is_not_audio_is_refused_plainly(tmp_path: Path) -> None:
    path = tmp_path / "fake.mp3"
    path.write_bytes(b"<html>this is no audio</html>" * 100)
    with pytest.raises(AudioToolError, match="could not be read as audio"):
        await ready_for_transcription(path, "fake.mp3", TranscriptionSettings(provider="audio"))


@needs_ffmpeg
async def test_a_crafted_ogg_claiming_hours_is_bounded(tmp_path: Path) -> None:
    """A last page whose granule claims ten hours: the cap applies, and ffmpeg (which finds
    the real, short audio) finishes within its timeout."""
    data = bytearray(voice_note("tiny"))
    last = data.rfind(b"OggS")
    struct.pack_into("<q", data, last + 6, 48_000 * 36_000)
    path = tmp_path / "crafted.ogg"
    path.write_bytes(bytes(data))
    settings = TranscriptionSettings(provider="audio", max_seconds=60)
    try:
        ready = await ready_for_transcription(path, "crafted.ogg", settings)
    except AudioToolError:
        return  # refused plainly is as good
    assert ready.converted and ready.cut_at == 60 and len(ready.data) < 100_000


@needs_ffmpeg
async def test_speech_in_another_format_becomes_ogg_opus() -> None:
    from tests.fakes.voice_maker import wav_of

    assert is_ogg_opus(await to_ogg_opus(wav_of("hello")))


def test_a_short_reply_is_spoken_whole_and_a_long_one_up_to_a_sentence_end() -> None:
    assert spoken_text("Done.\n\n- one\n- two", 100) == "Done. - one - two"
    long = "First sentence here. Second one is longer than that. " + "word " * 100
    spoken = spoken_text(long, 80)
    assert spoken == f"First sentence here. Second one is longer than that. … {REST_IS_WRITTEN}"
    no_stop = spoken_text("word " * 50, 23)
    assert no_stop == f"word word word word … {REST_IS_WRITTEN}"


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "talon.yaml"
    path.write_text(
        "providers:\n  claude: {type: anthropic, api_key: x}\n  local: {type: openai, base_url: 'http://127.0.0.1:1/v1'}\n"
        "channels:\n  - {name: console, type: console}\n" + body
    )
    return path


def test_audio_settings_must_name_an_openai_type_provider(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        "transcription: {provider: claude}\nspeech: {provider: nowhere}\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    text = str(caught.value)
    assert "transcription.provider: 'claude' is of type 'anthropic'" in text
    assert "speech.provider: no provider named 'nowhere'; use one of claude, local" in text


def test_a_channel_may_carry_its_own_transcription(tmp_path: Path) -> None:
    from gateway.voice.clients import speech_for, transcription_for

    path = _config(tmp_path, "transcription: {provider: local, language: en}\n")
    path.write_text(
        path.read_text().replace(
            "{name: console, type: console}",
            "{name: console, type: console, transcription: {provider: local, echo: true}}",
        )
    )
    settings = load_settings(path)
    assert transcription_for(settings, "console").echo is True
    assert transcription_for(settings, "elsewhere").language == "en"
    assert speech_for(settings, "console").provider is None


def test_a_personas_speech_must_name_an_openai_type_provider(tmp_path: Path) -> None:
    from gateway.personas import load_personas
    from tests.harness import write_config

    config = write_config(
        tmp_path,
        provider={"type": "anthropic", "api_key": "k"},
        personas={"assistant": {"speech": {"provider": "fake", "voice": "onyx"}}},
    )
    with pytest.raises(ConfigError) as caught:
        load_personas(load_settings(config))
    assert "assistant/persona.yaml: speech.provider: 'fake' is of type 'anthropic'" in str(caught.value)
