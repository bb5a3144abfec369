"""``talon chat`` as a person uses it: the window in a pseudo-terminal (pexpect), against a
``talon run`` subprocess and stand-in model APIs in their own processes.

Two model stand-ins: ``fast`` answers at once (persona ``assistant``, the console's binding),
``slow`` starts each reply after :data:`SLOW` seconds (persona ``slow``), so a reply can be
pending while the test types. Every wait is bounded; the waits that measure a promise
("at once", "within a second") compare with the slow model's delay or a generous bound.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest
import yaml

from tests.deployed.support import deployed_daemon, fake_process, write_deployed_config
from tests.e2e.daemon import TALON, Daemon, talon, talon_env

pytestmark = pytest.mark.timeout(180)

SLOW = 8.0
"""Seconds the slow model waits before each reply: far longer than anything "at once" may take."""
WAIT = 30.0
"""The longest any expected line may take to appear on a loaded machine."""


@dataclass
class Bot:
    config: Path
    daemon: Daemon

    @property
    def data(self) -> Path:
        return self.config.parent / "data"


def _config(root: Path, fast_url: str, slow_url: str) -> Path:
    config = write_deployed_config(
        root, model_url=fast_url, channels=[{"name": "console", "type": "console"}]
    )
    settings = yaml.safe_load(config.read_text())
    settings["providers"]["slow"] = {"type": "openai", "base_url": slow_url, "api_key": "none"}
    config.write_text(yaml.safe_dump(settings))
    slow = root / "personas" / "slow"
    slow.mkdir(parents=True)
    (slow / "persona.yaml").write_text(yaml.safe_dump({"model": "slow:test-model"}))
    (slow / "system.md").write_text("# Slow\n\nYou take your time.\n")
    return config


@asynccontextmanager
async def models(tmp_path: Path) -> AsyncIterator[tuple[str, str]]:
    async with (
        fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai", max_seconds=170) as fast,
        fake_process(
            "tests.fakes.model_api",
            tmp_path / "slow",
            "--kind",
            "openai",
            "--delay",
            str(SLOW),
            max_seconds=170,
        ) as slow,
    ):
        yield fast.url, slow.url


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    (tmp_path / "slow").mkdir()
    async with models(tmp_path) as (fast_url, slow_url):
        (tmp_path / "bot").mkdir()
        config = _config(tmp_path / "bot", fast_url, slow_url)
        async with deployed_daemon(config) as daemon:
            yield Bot(config, daemon)


@contextmanager
def window(config: Path, *args: str) -> Iterator[pexpect.spawn]:
    """``talon chat`` in a 40x120 pseudo-terminal; killed at the end if still open."""
    env = talon_env({"TERM": "xterm-256color", "PROMPT_TOOLKIT_NO_CPR": "1", "PAGER": "cat"})
    child = pexpect.spawn(
        TALON[0],
        [*TALON[1:], "chat", "-c", str(config), *args],
        env=env,
        encoding="utf-8",
        codec_errors="replace",
        dimensions=(40, 120),
        timeout=WAIT,
    )
    log = (config.parent / "windows.log").open("a", encoding="utf-8")
    log.write(f"\n---- talon chat {' '.join(args)}\n")
    child.logfile_read = log  # what the terminal showed, for a failing test's report
    try:
        yield child
    finally:
        if child.isalive():
            child.terminate(force=True)
        log.close()


def prompt(child: pexpect.spawn) -> None:
    child.expect("you> ")


def typed(child: pexpect.spawn, line: str) -> None:
    """Type ``line`` and Enter once the window's prompt is drawn."""
    child.send(line + "\r")


def outbox_texts(data: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{data / 'talon.db'}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("SELECT text FROM outbox ORDER BY id")]
    finally:
        conn.close()


def user_messages(data: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{data / 'talon.db'}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("SELECT text FROM messages WHERE role = 'user' ORDER BY id")]
    finally:
        conn.close()


def turn_running(data: Path) -> bool:
    """The daemon is inside a turn (waiting on the model): what the window's "writing…" shows."""
    conn = sqlite3.connect(f"file:{data / 'talon.db'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT COUNT(*) FROM runs WHERE status = 'running'").fetchone()[0] > 0
    finally:
        conn.close()


async def wait_until(condition: object, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.2)


async def test_stop_typed_while_a_reply_is_pending_cancels_it_at_once(bot: Bot) -> None:
    with window(bot.config, "--persona", "slow") as child:
        prompt(child)
        typed(child, "take your time")
        await wait_until(lambda: turn_running(bot.data))  # the slow model is thinking
        started = time.monotonic()
        typed(child, "/stop")
        child.expect("Stopped.")
        assert time.monotonic() - started < SLOW / 2, "the /stop waited for the reply"
        prompt(child)
        typed(child, "/quit")
        child.expect(pexpect.EOF)
    assert "Nothing is running." not in child.before
    assert "echo: take your time" not in outbox_texts(bot.data)


async def test_help_is_local_new_notices_print_before_the_prompt_and_ctrl_c_exits_at_once(bot: Bot) -> None:
    with window(bot.config) as child:
        prompt(child)
        typed(child, "/help")
        child.expect("/stop +cancel the reply being written")
        prompt(child)
        typed(child, "/new")
        child.expect("Started a new conversation.")
        prompt(child)  # a fresh prompt after the notice, not before it
        await asyncio.sleep(0.5)  # idle at the prompt
        started = time.monotonic()
        child.sendintr()
        child.expect(pexpect.EOF, timeout=10)
        elapsed = time.monotonic() - started
        child.close()
    assert elapsed < 1.5, f"Ctrl-C at the prompt took {elapsed:.2f}s to exit"
    assert child.exitstatus == 0
    assert "/help" not in user_messages(bot.data), "/help went to the daemon"


async def test_a_reply_that_arrived_while_the_window_was_closed_is_shown_when_it_opens(bot: Bot) -> None:
    with window(bot.config, "--persona", "slow", "--thread", "later") as child:
        prompt(child)
        typed(child, "answer me later")
        await wait_until(lambda: turn_running(bot.data))
        child.sendintr()  # leave while the reply is being written
        child.expect("kept")
        child.expect(pexpect.EOF)
    await wait_until(lambda: "echo: answer me later" in outbox_texts(bot.data), SLOW + WAIT)
    with window(bot.config, "--thread", "later") as child:
        child.expect("echo: answer me later")
        prompt(child)
        typed(child, "/quit")
        child.expect(pexpect.EOF)
    with window(bot.config, "--thread", "later") as child:  # shown once: the window confirmed it
        prompt(child)
        typed(child, "/quit")
        child.expect(pexpect.EOF)
        assert "echo: answer me later" not in child.before


async def test_the_window_reconnects_after_a_daemon_restart_and_keeps_showing_notifications(bot: Bot) -> None:
    with window(bot.config) as child:
        prompt(child)
        await bot.daemon.stop()
        child.expect("Lost the daemon")
        await bot.daemon.start(bot.data, ready_timeout=60)
        child.expect("Reconnected to the daemon.")
        code, _, err = await talon(
            "send", "-c", str(bot.config), "console", "the **nightly** build passed", "--chat", "main"
        )
        assert code == 0, err
        child.expect("build passed")  # after the bold "nightly"
        typed(child, "still there?")
        child.expect(r"echo: .*still there\?")  # the thread names senders since talon send
        typed(child, "/quit")
        child.expect(pexpect.EOF)


async def test_with_the_daemon_down_chat_says_so_in_one_line_at_once(tmp_path: Path) -> None:
    config = write_deployed_config(
        tmp_path, model_url="http://127.0.0.1:9/v1", channels=[{"name": "console", "type": "console"}]
    )
    with window(config) as child:
        child.expect(pexpect.EOF, timeout=15)
        child.close()
    assert "daemon is not running" in child.before
    assert "you>" not in child.before
    assert child.exitstatus == 1


async def test_an_unknown_persona_is_refused_naming_the_personas(bot: Bot) -> None:
    code, out, err = await talon("chat", "-c", str(bot.config), "--persona", "nobody", "-m", "hi")
    assert code != 0
    assert out == ""
    assert "no persona named 'nobody'" in err and "assistant, slow" in err
    assert "hi" not in user_messages(bot.data)
    with window(bot.config, "--persona", "nobody") as child:
        child.expect(pexpect.EOF, timeout=15)
        child.close()
    assert "no persona named 'nobody'" in child.before and "you>" not in child.before
    assert child.exitstatus == 1


async def test_m_prints_the_model_text_as_written_and_render_renders_it(bot: Bot) -> None:
    text = "keep <tag> and _x_ and 1. as they are"
    code, out, err = await talon("chat", "-c", str(bot.config), "-m", text)
    assert (code, err) == (0, "")
    assert out == f"echo: {text}\n"
    code, out, _ = await talon("chat", "-c", str(bot.config), "--render", "-m", "a _b_ c")
    assert code == 0
    assert "echo: a b c" in out and "_b_" not in out


async def test_a_long_reply_scrolls_into_view_and_the_prompt_stays_usable(bot: Bot) -> None:
    lines = "\n\n".join(f"paragraph {n} of the long reply" for n in range(1, 301))
    with window(bot.config) as child:
        prompt(child)
        code, out, _ = await talon("chat", "-c", str(bot.config), "-m", lines, timeout=90)
        assert code == 0 and out.rstrip().endswith("paragraph 300 of the long reply")
        child.expect("paragraph 300 of the long reply")
        prompt(child)
        typed(child, "/page")
        child.expect("paragraph 300 of the long reply")  # the pager (cat here) shows the last reply again
        prompt(child)
        typed(child, "/quit")
        child.expect(pexpect.EOF)
