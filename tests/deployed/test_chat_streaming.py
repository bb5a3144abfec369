"""Streamed replies in ``talon chat``, as deployed: a ``talon run`` subprocess and a model
stand-in (in its own process) that streams its echo a word at a time. In a terminal the reply
being written is drawn above the prompt and grows in place, then the final reply prints and the
preview is gone; with standard input a pipe only the final reply is printed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pexpect
import pytest

from tests.deployed.support import deployed_daemon, fake_process, write_deployed_config
from tests.deployed.test_chat_window import Bot, outbox_texts, prompt, typed, wait_until, window
from tests.e2e.daemon import talon

pytestmark = pytest.mark.timeout(180)

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"
FINAL = f"echo: {WORDS}"
PREVIEW = "✍️ writing…"  # the preview's last line; the prompt's own state is "(writing… /stop cancels)"


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    async with fake_process(
        "tests.fakes.model_api", tmp_path, "--kind", "openai", "--chunk-delay", "0.35", max_seconds=170
    ) as model:
        (tmp_path / "bot").mkdir()
        console = {"name": "console", "type": "console", "stream_interval": 0.5}
        config = write_deployed_config(tmp_path / "bot", model_url=model.url, channels=[console])
        async with deployed_daemon(config) as daemon:
            yield Bot(config, daemon)


async def test_the_window_shows_the_reply_growing_in_place_then_the_final_replaces_it(bot: Bot) -> None:
    with window(bot.config) as child:
        prompt(child)
        typed(child, WORDS)
        child.expect(PREVIEW)  # the reply so far, drawn above the prompt
        shown = child.before.split("echo:")  # before it: the typed line
        assert len(shown) == 2 and "lima" not in shown[1], "the first preview was not partial"
        child.expect("lima")  # the same lines redrawn in place as the words arrive
        assert FINAL not in child.before, "the final reply came before the preview grew"
        child.expect_exact(FINAL)  # the final reply, printed whole as a reply is
        await wait_until(lambda: FINAL in outbox_texts(bot.data))
        typed(child, "/help")
        child.expect("/stop +cancel the reply being written")
        assert PREVIEW not in child.before, "the preview was still drawn after the final reply"
        typed(child, "/quit")
        child.expect(pexpect.EOF)
    assert outbox_texts(bot.data) == [FINAL]  # one reply, delivered once; previews are not stored


async def test_with_a_pipe_only_the_final_reply_is_printed(bot: Bot) -> None:
    code, out, err = await talon("chat", "-c", str(bot.config), stdin=f"{WORDS}\n".encode())
    assert code == 0, err
    assert FINAL in out and out.count("echo:") == 1
    assert "writing…" not in out
    code, out, err = await talon("chat", "-c", str(bot.config), "-m", "one two three four")
    assert code == 0, err
    assert out.strip() == "echo: one two three four"
