"""A reply streamed cut at every UTF-16 position is stored and delivered exactly as the
model wrote it, through either provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.model_api import EVERY_UNIT, FakeAnthropic, FakeOpenAI, Reply
from tests.harness import provider_for, running_gateway, say, write_config
from tests.store_helpers import fetch_rows

# Emoji (a ZWJ family, flags, a skin tone), CJK (one outside the BMP), combining marks.
TEXT = "Hi 😀 👩‍👩‍👧‍👦 🇯🇵🇺🇦 👍🏽 — 中文字符 日本語 𠀋 𝄞 — e\u0301 n\u0303 a\u0308\u0304 ok"


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_reply_cut_at_every_utf16_unit_is_stored_and_sent_exactly(tmp_path: Path, kind: str) -> None:
    fake = FakeAnthropic() if kind == "anthropic" else FakeOpenAI()
    # As JSON escapes (each surrogate half its own "\udXXX" delta), then as raw UTF-8
    # written to the socket in pieces cut inside characters.
    fake.script(
        Reply(text=TEXT, utf16_cuts=EVERY_UNIT),
        Reply(text=TEXT, utf16_cuts=EVERY_UNIT, raw_utf8=True, cut_characters=True),
    )
    async with fake:
        async with running_gateway(write_config(tmp_path, provider=provider_for(fake, kind))) as gw:
            turns = [await say(gw, "escaped"), await say(gw, "raw")]
            thread_id = turns[0].intake.thread_id
            stored = await fetch_rows(
                gw.components.db,
                "SELECT text FROM messages WHERE thread_id = ? AND role = 'assistant' ORDER BY id",
                (thread_id,),
            )
            queued = await fetch_rows(
                gw.components.db, "SELECT text FROM outbox WHERE thread_id = ? ORDER BY id", (thread_id,)
            )

    assert [t.status for t in turns] == ["completed", "completed"]
    assert [t.texts for t in turns] == [[TEXT], [TEXT]]
    assert [r["text"] for r in stored] == [TEXT, TEXT]
    assert [r["text"] for r in queued] == [TEXT, TEXT]
    assert len(fake.requests) == 2
