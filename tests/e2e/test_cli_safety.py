"""The ``talon`` command cannot hurt: run as a user would, in the wrong folder, without a
database, into a closed pipe, against open bots; and the operator's commands (doctor --fix,
personas, dead letters, logs, completion, --version)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.daemon import TALON, Daemon, talon, talon_env
from tests.fakes.model_api import FakeOpenAI, Reply
from tests.fakes.model_script import Error

READ_ONLY = [
    ["threads"],
    ["audit"],
    ["schedules"],
    ["runs"],
    ["status"],
    ["personas"],
    ["dead-letters"],
    ["logs"],
]


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _one_line_without_traceback(err: str) -> None:
    assert "Traceback" not in err
    assert err.strip() and err.strip().count("\n") == 0, err


async def _init(tmp_path: Path, env_lines: list[str] = ("TALON_MODEL=local:x",)) -> Path:  # type: ignore[assignment]
    bot = tmp_path / "mybot"
    code, _, err = await talon("init", str(bot))
    assert code == 0, err
    (bot / ".env").write_text("\n".join(env_lines) + "\n")
    return bot


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: c[0])
async def test_read_only_commands_outside_a_bot_folder_say_what_to_do_and_create_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    # The case: run inside personas/ of a bot, where ./data would break the next start.
    bot = await _init(tmp_path)
    inside = bot / "personas"
    before = _tree(bot)
    code, out, err = await talon(*command, cwd=inside)
    assert code == 2 and out == ""
    _one_line_without_traceback(err)
    assert "no talon.yaml here" in err and "-c" in err
    assert _tree(bot) == before


@pytest.mark.parametrize(
    "command", [["threads"], ["audit"], ["schedules"], ["runs"], ["dead-letters"]], ids=str
)
async def test_without_a_database_they_say_so_and_create_no_data_dir(
    tmp_path: Path, command: list[str]
) -> None:
    bot = await _init(tmp_path)
    code, out, err = await talon(*command, "-c", str(bot / "talon.yaml"))
    assert code == 1 and out == ""
    _one_line_without_traceback(err)
    assert "no database" in err and "talon run" in err
    assert not (bot / "data").exists()


async def test_an_unexpected_error_is_one_line_unless_debug(tmp_path: Path) -> None:
    bot = await _init(tmp_path)
    config = str(bot / "talon.yaml")
    assert (await talon("migrate", "-c", config))[0] == 0
    (tmp_path / "a-file").write_text("")
    target = str(tmp_path / "a-file" / "copy.db")  # its folder is a file
    code, _, err = await talon("backup", "-c", config, target)
    assert code == 1
    _one_line_without_traceback(err)
    assert "--debug" in err
    code, _, err = await talon("backup", "-c", config, target, "--debug")
    assert code == 1 and "Traceback" in err


def _into_a_closed_pipe(*args: str) -> tuple[int, str]:
    """Run talon with its stdout a pipe whose reader is already gone (`talon ... | head -0`)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [*TALON, *args], stdout=write_end, stderr=subprocess.PIPE, env=talon_env(), timeout=60
        )
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr.decode()


async def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        bot = await _init(tmp_path, [f"OPENAI_BASE_URL={fake.base_url}", "TALON_MODEL=local:x"])
        config = str(bot / "talon.yaml")
        async with Daemon(bot / "talon.yaml") as daemon:
            await daemon.start(bot / "data")
            for args in (["status", "-c", config], ["threads", "-c", config], ["personas", "-c", config]):
                code, err = await asyncio.to_thread(_into_a_closed_pipe, *args)
                assert err == "" and code == 141, (args, err)


async def test_status_json_is_the_daemons_status(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        bot = await _init(tmp_path, [f"OPENAI_BASE_URL={fake.base_url}", "TALON_MODEL=local:x"])
        async with Daemon(bot / "talon.yaml") as daemon:
            await daemon.start(bot / "data")
            code, out, err = await talon("status", "-c", str(bot / "talon.yaml"), "--json")
    assert code == 0, err
    status = json.loads(out)
    assert status["channels"]["console"]["state"] == "connected" and status["dead_letters"] == []


# ---------------------------------------------------------------- doctor


async def test_doctor_without_a_config_reports_the_built_in_defaults_and_creates_nothing(
    tmp_path: Path,
) -> None:
    code, out, err = await talon("doctor", cwd=tmp_path)
    assert "talon.yaml valid" not in out
    assert "no talon.yaml here: checking the built-in defaults" in out
    assert "does not exist yet" in out and "--fix" in out
    assert "Traceback" not in err
    assert _tree(tmp_path) == []
    assert code == 1  # the built-in anthropic provider has no key here


async def _configure(bot: Path, channels: list[dict[str, Any]]) -> None:
    config = yaml.safe_load((bot / "talon.yaml").read_text())
    config["channels"] += channels
    (bot / "talon.yaml").write_text(yaml.safe_dump(config))


async def test_doctor_warns_for_every_open_channel(tmp_path: Path) -> None:
    bot = await _init(tmp_path)
    await _configure(
        bot,
        [
            {"name": "tg", "type": "telegram", "token": "123:abc"},
            {"name": "sl", "type": "slack", "bot_token": "xoxb-1", "app_token": "xapp-1"},
            {"name": "dc", "type": "discord", "token": "dc-token"},
            {"name": "closed", "type": "discord", "token": "dc-token-2", "allowed_users": ["42"]},
        ],
    )
    _, out, _ = await talon("doctor", "-c", str(bot / "talon.yaml"))
    warnings = [line for line in out.splitlines() if "anyone who can reach" in line]
    assert [w.split("(")[1].split(")")[0] for w in warnings] == ["tg", "sl", "dc"]
    assert "Slack bot" in warnings[1] and "Discord bot" in warnings[2]


async def test_doctor_fix_creates_the_data_dir_and_makes_it_owner_only(tmp_path: Path) -> None:
    bot = await _init(tmp_path)
    config = str(bot / "talon.yaml")
    _, out, _ = await talon("doctor", "-c", config, "--fix")
    assert f"fixed created {bot / 'data'} (mode 700)" in out
    assert stat.S_IMODE((bot / "data").stat().st_mode) == 0o700

    assert (await talon("migrate", "-c", config))[0] == 0
    os.chmod(bot / "data", 0o755)
    os.chmod(bot / "data" / "talon.db", 0o644)
    _, out, _ = await talon("doctor", "-c", config)
    assert "mode 755, readable by others" in out and "mode 644, readable by others" in out
    assert stat.S_IMODE((bot / "data").stat().st_mode) == 0o755  # without --fix nothing changes
    _, out, _ = await talon("doctor", "-c", config, "--fix")
    assert "mode 755 -> 700" in out and "mode 644 -> 600" in out
    assert stat.S_IMODE((bot / "data").stat().st_mode) == 0o700
    assert stat.S_IMODE((bot / "data" / "talon.db").stat().st_mode) == 0o600
    _, out, _ = await talon("doctor", "-c", config)
    assert "writable and owner-only" in out


# ---------------------------------------------------------------- operator commands


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
