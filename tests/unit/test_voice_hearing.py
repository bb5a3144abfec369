"""The hearing step's guards: an audio path that leads out of the workspace is refused, and a
slow or failing audio endpoint ends within its bounds with an error that says why."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ProviderSettings, Settings
from gateway.runtime.model import ProviderError
from gateway.voice.audio_api import AudioClient
from gateway.voice.hearing import Hearing, wants_hearing
from tests.fakes.audio_api import FakeAudioAPI


def _hearing(data: Path) -> Hearing:
    return Hearing(
        db=None,
        settings=Settings(),
        connectors={},
        outbox=None,
        clients=None,
        workspaces_path=data / "workspaces",
    )  # type: ignore[arg-type]


def _thread() -> Any:
    class Row:
        id = 3
        persona = "assistant"

    return Row()


def test_an_audio_path_that_leads_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "workspaces" / "assistant" / "threads" / "3"
    (workspace / "inbox" / "9").mkdir(parents=True)
    (tmp_path / "talon.db").write_bytes(b"secret rows")
    (workspace / "inbox" / "9" / "voice.ogg").symlink_to(tmp_path / "talon.db")
    (workspace / "inbox" / "9" / "ok.ogg").write_bytes(b"OggS")
    hearing = _hearing(tmp_path)
    with pytest.raises(ValueError, match="no longer a plain file in the workspace"):
        hearing._host_path(_thread(), "/workspace/inbox/9/voice.ogg")
    with pytest.raises(ValueError, match="not in the thread's workspace"):
        hearing._host_path(_thread(), "/shared/voice.ogg")
    assert hearing._host_path(_thread(), "/workspace/inbox/9/ok.ogg").read_bytes() == b"OggS"


def test_only_audio_not_yet_heard_is_heard() -> None:
    note = {"name": "v.ogg", "mime_type": "audio/ogg", "path": "/workspace/inbox/1/v.ogg"}
    assert wants_hearing(note)
    assert not wants_hearing({**note, "transcript": "hi"})
    assert not wants_hearing({**note, "transcript_note": "not transcribed: x"})
    assert not wants_hearing({**note, "path": None, "note": "could not be put in the workspace"})
    assert not wants_hearing({"name": "a.pdf", "mime_type": "application/pdf", "path": "/workspace/a.pdf"})


async def test_a_slow_endpoint_ends_at_the_timeout() -> None:
    async with FakeAudioAPI(delay=5.0) as fake:
        client = AudioClient(
            "audio", ProviderSettings(type="openai", base_url=fake.base_url, api_key=fake.api_key)
        )
        started = time.monotonic()
        with pytest.raises(ProviderError, match=r"no complete response within 0\.5 s"):
            await client.transcribe(
                b"OggS", "v.ogg", "audio/ogg", model="m", language=None, timeout=0.5, attempts=3
            )
        assert time.monotonic() - started < 2.0
        await client.close()


async def test_a_refused_key_is_not_retried() -> None:
    async with FakeAudioAPI() as fake:
        client = AudioClient(
            "audio", ProviderSettings(type="openai", base_url=fake.base_url, api_key="wrong")
        )
        with pytest.raises(ProviderError, match="401"):
            await client.speak("hello", model="tts-1", voice="alloy", timeout=5, attempts=3)
        assert len(fake.speeches) == 1
        await client.close()


def test_doctor_says_when_ffmpeg_is_missing_but_voice_is_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.voice import ffmpeg
    from gateway.voice.doctor import voice_findings

    configured = Settings.model_validate(
        {
            "providers": {"audio": {"type": "openai", "base_url": "http://127.0.0.1:1/v1"}},
            "channels": [{"name": "console", "type": "console", "speech": {"provider": "audio"}}],
        }
    )
    assert (
        voice_findings(Settings.model_validate({"channels": [{"name": "console", "type": "console"}]})) == []
    )
    monkeypatch.setitem(ffmpeg._ENV, "PATH", "/nonexistent")
    [(level, text)] = voice_findings(configured)
    assert level == "warn" and "apt-get install ffmpeg" in text and "(console)" in text
