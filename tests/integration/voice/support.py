"""Shared pieces of the voice tests: the config, a model that answers what it heard, waiting."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.fakes.audio_api import FakeAudioAPI
from tests.fakes.model_api import Reply
from tests.harness import provider_for, write_config

AUDIO = "audio"
CHAT = 7101
NO_PACING = {"per_second": 0, "per_chat_per_second": 0, "group_per_minute": 0}


def request_text(body: dict[str, Any]) -> str:
    parts = []
    for message in body.get("messages", []):
        content = message["content"]
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if block.get("type") == "text":
                parts.append(block["text"])
    return "\n".join(parts)


class Model:
    """Answers ``Booked: <the transcript it was shown>`` and keeps every request's text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = request_text(body)
        self.texts.append(text)
        heard = re.findall(r"; transcript:\]\n(.*)", text)
        return Reply(text="Booked: " + (heard[-1] if heard else "(nothing heard)"))


def telegram_channel(telegram: Any, **extra: Any) -> dict[str, Any]:
    return {
        "name": "team-telegram",
        "type": "telegram",
        "token": telegram.token,
        "api_base_url": telegram.url,
        "pacing": NO_PACING,
        **extra,
    }


def voice_config(
    root: Path,
    model: Any,
    audio: FakeAudioAPI,
    *,
    channel: dict[str, Any],
    transcription: dict[str, Any] | None = None,
    speech: dict[str, Any] | None = None,
) -> Path:
    extra: dict[str, Any] = {
        "channels": [channel],
        "bindings": [{"channel": channel["name"], "persona": "assistant"}],
    }
    config = write_config(root, provider=provider_for(model), extra=extra)
    raw = yaml.safe_load(config.read_text())
    raw["providers"][AUDIO] = {"type": "openai", "base_url": audio.base_url, "api_key": audio.api_key}
    if transcription is not None:
        raw["transcription"] = transcription
    if speech is not None:
        raw["speech"] = speech
    config.write_text(yaml.safe_dump(raw))
    return config


async def wait_until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    async with asyncio.timeout(timeout):
        while not (found := check()):
            await asyncio.sleep(0.02)
    return found
