"""A voice note's Talon overhead, the transcription call itself left out: in process, the
Telegram stand-in, the audio stand-in and an instant model, one OGG/Opus voice note
(espeak-ng) at a time, each from its own chat.

- before: from the note's update being queued at the Bot API to its audio arriving at the
  transcription endpoint (getUpdates, getFile and the download, intake commit, the move into
  the workspace, the queue, the duration check, reading the file);
- after: from the transcript's answer to the model's request (storing the transcript,
  building the turn's context).

python -m bench.bench_voice [--notes 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.fakes.audio_api import FakeAudioAPI
from tests.fakes.model_api import FakeAnthropic, Reply
from tests.fakes.telegram_api import FakeTelegramAPI
from tests.fakes.voice_maker import voice_note
from tests.harness import running_gateway
from tests.integration.voice.support import AUDIO, telegram_channel, voice_config


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


async def main(notes: int) -> None:
    note = voice_note("Please move the weekly meeting to Thursday afternoon")
    asked: list[float] = []

    def model(body: dict[str, Any]) -> Reply:
        asked.append(time.monotonic())
        return Reply(text="done")

    with tempfile.TemporaryDirectory() as tmp:
        async with (
            FakeTelegramAPI() as telegram,
            FakeAnthropic(responder=model) as fake,
            FakeAudioAPI() as audio,
        ):
            config = voice_config(
                Path(tmp), fake, audio, channel=telegram_channel(telegram), transcription={"provider": AUDIO}
            )
            before, after = [], []
            async with running_gateway(config):
                for i in range(notes + 3):  # the first three warm up
                    chat = 9000 + i
                    injected = time.monotonic()
                    telegram.inject_message(chat, "", user_id=chat, voice=note)
                    await telegram.wait_for_sent(chat, 1, timeout=30)
                    heard = audio.transcriptions[-1]
                    if i >= 3:
                        before.append((heard["at"] - injected) * 1000)
                        after.append((asked[-1] - heard["answered_at"]) * 1000)
    total = [b + a for b, a in zip(before, after, strict=True)]
    for name, values in (("before the call", before), ("after the call", after), ("overhead", total)):
        print(
            f"{name}: p50 {statistics.median(values):.1f} ms, p90 {_pct(values, 0.9):.1f} ms ({notes} notes)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=40)
    asyncio.run(main(parser.parse_args().notes))
