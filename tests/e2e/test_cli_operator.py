"""The operator's commands, run as a user would: --version and completion, personas, dead
letters (listed, retried, dropped) and logs (shown and followed)."""

from __future__ import annotations

import asyncio
import stat
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.cli_support import init_bot as _init
from tests.e2e.daemon import TALON, Daemon, talon, talon_env
from tests.fakes.model_api import FakeOpenAI, Reply
from tests.fakes.model_script import Error


async def test_version_and_completion() -> None:
    code, out, _ = await talon("--version")
    assert code == 0 and out.startswith("talon ")
    code, script, _ = await talon("completion", "bash")
    assert code == 0

    def complete(line: str) -> list[str]:
        words = line.split(" ")
        shell = (
            f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
            '_talon; printf "%s\\n" "${COMPREPLY[@]}"'
        )
        done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=30, check=True)
        return done.stdout.split()

    assert complete("talon dead") == ["dead-letters"]
    assert complete("talon dead-letters ") == ["list", "retry", "drop"]
    assert "--json" in complete("talon status --")
    assert complete("talon mcp ") == ["host-tools"]
    for shell in ("zsh", "fish"):
        code, text, _ = await talon("completion", shell)
        assert code == 0
        for command in ("dead-letters", "personas", "logs", "completion", "host-tools"):
            assert command in text


async def test_personas_shows_what_each_persona_may_do_without_a_daemon(tmp_path: Path) -> None:
    bot = await _init(tmp_path)
    (bot / "personas" / "assistant" / "persona.yaml").write_text(
        'model: "local:llama"\ndescription: Helps the team\n'
        'capabilities: ["memory.access:thread", "channel.send:console"]\nsubagents: [session-summarizer]\n'
        "mcp_servers: {echo: {command: python3, args: [echo.py]}}\n"
    )
    code, out, err = await talon("personas", "-c", str(bot / "talon.yaml"))
    assert code == 0, err
    assert out.split()[:3] == ["assistant", "local:llama", "console"]
    code, out, err = await talon("personas", "-c", str(bot / "talon.yaml"), "assistant")
    assert code == 0, err
    lines = [line.split() for line in out.splitlines()]
    assert ["model:", "local:llama"] in lines
    assert [
        "memory.access:thread",
        "memory_access,",
        "memory_search,",
        "memory_update,",
        "procedure_write",
    ] in lines
    assert ["channel.send:console", "channel_send"] in lines
    assert ["echo", "python3", "echo.py"] in lines
    assert ["sub-agents:", "session-summarizer"] in lines
    code, _, err = await talon("personas", "-c", str(bot / "talon.yaml"), "nobody")
    assert code == 1 and "no persona named 'nobody'" in err and "assistant" in err


async def test_dead_letters_are_listed_retried_and_dropped(tmp_path: Path) -> None:
    model_ok = False

    def responder(body: dict[str, Any]) -> Reply | Error:
        return Reply(text="recovered") if model_ok else Error(status=400, message="bad request")

    async with FakeOpenAI(responder=responder) as fake:
        bot = await _init(tmp_path, [f"OPENAI_BASE_URL={fake.base_url}", "TALON_MODEL=local:x"])
        config = str(bot / "talon.yaml")
        async with Daemon(bot / "talon.yaml") as daemon:
            await daemon.start(bot / "data")
            await talon("chat", "-c", config, "-m", "first", "--timeout", "20")
            await talon("chat", "-c", config, "-m", "second", "--timeout", "20")
            code, out, err = await talon("dead-letters", "-c", config)
            assert code == 0, err
            ids = [line.split()[0].lstrip("#") for line in out.splitlines()]
            assert len(ids) == 2 and "bad request" in out
            model_ok = True
            code, out, _ = await talon("dead-letters", "-c", config, "retry", ids[-1])
            assert code == 0 and f"dead letter #{ids[-1]} is queued again" in out
            for _ in range(200):
                if "recovered" in await _messages(bot):
                    break
                await asyncio.sleep(0.05)
            assert "recovered" in await _messages(bot)
            code, out, _ = await talon("status", "-c", config)
            assert "dead letters (1;" in out and f"#{ids[0]} " in out and f"#{ids[-1]} " not in out
            code, _, err = await talon("dead-letters", "-c", config, "retry", ids[-1])
            assert code == 1 and f"no dead letter #{ids[-1]}" in err
            assert await daemon.stop() == 0
        # Stopped: the database is changed under the data-dir lock.
        code, out, _ = await talon("dead-letters", "-c", config, "drop", ids[0])
        assert code == 0 and f"dropped dead letter #{ids[0]}" in out
        code, out, _ = await talon("dead-letters", "-c", config)
        assert out.strip() == "no dead letters"
        code, _, err = await talon("dead-letters", "-c", config, "drop")
        assert code == 2 and "needs the dead letter's ID" in err


async def _messages(bot: Path) -> str:
    import sqlite3

    with sqlite3.connect(bot / "data" / "talon.db") as db:
        return "\n".join(r[0] or "" for r in db.execute("SELECT text FROM messages"))


async def test_logs_shows_and_follows_the_daemons_log_file(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        bot = await _init(tmp_path, [f"OPENAI_BASE_URL={fake.base_url}", "TALON_MODEL=local:x"])
        config = str(bot / "talon.yaml")
        code, _, err = await talon("logs", "-c", config)
        assert code == 1 and "no log file" in err and "talon run" in err
        async with Daemon(bot / "talon.yaml") as daemon:
            await daemon.start(bot / "data")
            log_file = bot / "data" / "talon.log"
            assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
            code, out, _ = await talon("logs", "-c", config, "-n", "3")
            assert code == 0 and "talon ready" in out and len(out.splitlines()) <= 3
            follow = await asyncio.create_subprocess_exec(
                *TALON, "logs", "-c", config, "-f", "-n", "1", env=talon_env(), stdout=asyncio.subprocess.PIPE
            )
            try:
                assert follow.stdout is not None
                first = (await asyncio.wait_for(follow.stdout.readline(), 20)).decode()
                assert "talon ready" in first  # the last line so far
                assert await daemon.stop() == 0
                seen = ""
                async with asyncio.timeout(20):
                    while "talon.daemon: stopped" not in seen:
                        seen += (await follow.stdout.readline()).decode()
            finally:
                follow.terminate()
                await follow.wait()
        assert "stopping" in seen and "talon ready" not in seen  # what came after, once
