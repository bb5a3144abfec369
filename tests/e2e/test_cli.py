"""A newcomer's path with the real ``talon`` command: init -> run -> chat, and the
refusals a user meets when something is wrong."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.daemon import TALON, Daemon, talon, talon_env
from tests.fakes.model_api import FakeAnthropic, FakeOpenAI, Reply


async def _init(tmp_path: Path, env_lines: list[str]) -> Path:
    code, _, err = await talon("init", str(tmp_path / "mybot"))
    assert code == 0, err
    bot = tmp_path / "mybot"
    assert (bot / "talon.yaml").is_file() and (bot / ".env.example").is_file()
    assert (bot / "personas" / "assistant" / "persona.yaml").is_file()
    (bot / ".env").write_text("\n".join(env_lines) + "\n")
    return bot


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_init_run_chat(tmp_path: Path, kind: str) -> None:
    fake_cls = FakeAnthropic if kind == "anthropic" else FakeOpenAI
    async with fake_cls() as fake:
        env = (
            [
                "ANTHROPIC_API_KEY=sk-test-secret-123",
                f"ANTHROPIC_BASE_URL={fake.base_url}",
                "TALON_MODEL=anthropic:claude-test",
            ]
            if kind == "anthropic"
            else [f"OPENAI_BASE_URL={fake.base_url}", "TALON_MODEL=local:llama-test"]
        )
        bot = await _init(tmp_path, env)
        config = str(bot / "talon.yaml")
        async with Daemon(bot / "talon.yaml") as daemon:
            await daemon.start(bot / "data")
            code, out, err = await talon("chat", "-c", config, "-m", "hello gateway")
            assert (code, out.strip()) == (0, "echo: hello gateway"), err
            code, out, _ = await talon("status", "-c", config)
            assert code == 0 and "channel console: connected" in out
            assert await daemon.stop() == 0
        assert "sk-test-secret-123" not in daemon.log()
        code, out, _ = await talon("threads", "-c", config)
        assert code == 0 and "console" in out and "assistant" in out


async def test_chat_without_a_daemon_fails_with_one_line(tmp_path: Path) -> None:
    bot = await _init(tmp_path, ["TALON_MODEL=local:x"])
    code, out, err = await talon("chat", "-c", str(bot / "talon.yaml"), "-m", "hi")
    assert code != 0 and out == ""
    assert err.strip().count("\n") == 0 and "not running" in err


async def test_chat_times_out_with_a_clear_reason(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=lambda body: Reply(text="slow", delay=5)) as fake:
        bot = await _init(tmp_path, [f"OPENAI_BASE_URL={fake.base_url}", "TALON_MODEL=local:x"])
        async with Daemon(bot / "talon.yaml") as daemon:
            await daemon.start(bot / "data")
            code, _, err = await talon("chat", "-c", str(bot / "talon.yaml"), "-m", "hi", "--timeout", "0.5")
        assert code != 0 and "--timeout" in err


async def test_bad_config_lists_every_problem_with_its_key(tmp_path: Path) -> None:
    config = tmp_path / "talon.yaml"
    config.write_text(
        "data_dir: data\n"
        "colour: blue\n"
        "providers: {local: {type: openai, base_url: 'http://127.0.0.1:9/v1'}}\n"
        "channels:\n"
        "  - {name: console, type: console}\n"
        "  - {name: tg, type: telegram, token: '${TELEGRAM_BOT_TOKEN}'}\n"
        "bindings:\n"
        "  - {channel: nowhere, persona: assistant}\n"
    )
    code, _, err = await talon("run", "-c", str(config), env=talon_env())
    assert code == 2
    assert "colour: unknown key" in err
    assert "channels[1].token" in err and "TELEGRAM_BOT_TOKEN" in err
    assert "bindings[0].channel" in err


async def test_second_daemon_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        bot = await _init(tmp_path, [f"OPENAI_BASE_URL={fake.base_url}", "TALON_MODEL=local:x"])
        async with Daemon(bot / "talon.yaml") as daemon:
            await daemon.start(bot / "data")
            code, _, err = await talon("run", "-c", str(bot / "talon.yaml"), timeout=30)
        assert code == 1 and "another Talon daemon" in err


async def test_newer_database_is_refused(tmp_path: Path) -> None:
    bot = await _init(tmp_path, ["TALON_MODEL=local:x"])
    code, out, err = await talon("migrate", "-c", str(bot / "talon.yaml"))
    assert code == 0 and "applied 0001_initial.sql" in out
    with sqlite3.connect(bot / "data" / "talon.db") as db:
        db.execute("PRAGMA user_version = 999")
    code, _, err = await talon("run", "-c", str(bot / "talon.yaml"))
    assert code == 1 and "newer than this Talon" in err


async def test_backup_while_running_is_a_consistent_copy(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        bot = await _init(tmp_path, [f"OPENAI_BASE_URL={fake.base_url}", "TALON_MODEL=local:x"])
        config = str(bot / "talon.yaml")
        async with Daemon(bot / "talon.yaml") as daemon:
            await daemon.start(bot / "data")
            assert (await talon("chat", "-c", config, "-m", "keep me"))[0] == 0
            code, _, err = await talon("backup", "-c", config, str(tmp_path / "copy.db"))
            assert code == 0, err
        with sqlite3.connect(tmp_path / "copy.db") as db:
            texts = [r[0] for r in db.execute("SELECT text FROM messages ORDER BY id")]
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert texts == ["keep me", "echo: keep me"]


async def test_sigterm_lets_the_running_turn_finish_and_deliver(tmp_path: Path) -> None:
    async with FakeOpenAI(responder=lambda body: Reply(text="finished anyway", delay=1.0)) as fake:
        bot = await _init(tmp_path, [f"OPENAI_BASE_URL={fake.base_url}", "TALON_MODEL=local:x"])
        config = str(bot / "talon.yaml")
        async with Daemon(bot / "talon.yaml") as daemon:
            await daemon.start(bot / "data")
            chat = asyncio.create_task(talon("chat", "-c", config, "-m", "long job"))
            for _ in range(100):  # wait until the model call is in flight
                if fake.requests:
                    break
                await asyncio.sleep(0.05)
            assert await daemon.stop() == 0
            code, out, err = await chat
        assert (code, out.strip()) == (0, "finished anyway"), err
        assert "stopping" in daemon.log()


async def test_json_logs_carry_thread_and_run_ids(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        bot = await _init(tmp_path, [f"OPENAI_BASE_URL={fake.base_url}", "TALON_MODEL=local:x"])
        async with Daemon(
            bot / "talon.yaml", None, None, "--log-format", "json", "--log-level", "debug"
        ) as daemon:
            await daemon.start(bot / "data")
            assert (await talon("chat", "-c", str(bot / "talon.yaml"), "-m", "hi"))[0] == 0
            await daemon.stop()
        lines = [json.loads(line) for line in daemon.log().splitlines() if line.startswith("{")]
        assert lines, daemon.log()
        assert all({"ts", "level", "logger", "msg"} <= set(line) for line in lines)
        assert any(line.get("thread_id") and line.get("run_id") for line in lines)


async def test_doctor_checks_the_provider_with_a_tiny_request(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        bot = await _init(tmp_path, [f"OPENAI_BASE_URL={fake.base_url}", "TALON_MODEL=local:tiny"])
        code, out, _ = await talon("doctor", "-c", str(bot / "talon.yaml"))
        assert code == 0 and "local:tiny answered" in out
        assert fake.requests and fake.requests[0]["model"] == "tiny"
    bot2 = await _init(tmp_path / "b", ["OPENAI_BASE_URL=http://127.0.0.1:9/v1", "TALON_MODEL=local:tiny"])
    code, out, _ = await talon("doctor", "-c", str(bot2 / "talon.yaml"))
    assert code == 1 and "FAIL  local:tiny" in out


async def test_run_without_a_config_uses_the_built_in_defaults(tmp_path: Path) -> None:
    async with FakeOpenAI() as fake:
        env = talon_env({"OPENAI_BASE_URL": fake.base_url, "TALON_MODEL": "local:x"})
        log = (tmp_path / "run.log").open("wb")
        daemon = await asyncio.create_subprocess_exec(
            *TALON, "run", cwd=tmp_path, env=env, stdout=log, stderr=log
        )
        try:
            for _ in range(200):
                chat = await asyncio.create_subprocess_exec(
                    *TALON,
                    "chat",
                    "-m",
                    "defaults?",
                    cwd=tmp_path,
                    env=env,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                out, err = await asyncio.wait_for(chat.communicate(), 60)
                if chat.returncode == 0 or b"not running" not in err:
                    break
                await asyncio.sleep(0.1)
        finally:
            daemon.terminate()
            await daemon.wait()
            log.close()
        assert (chat.returncode, out.decode().strip()) == (0, "echo: defaults?"), err
        assert (tmp_path / "data" / "talon.db").is_file()
        assert "built-in defaults" in (tmp_path / "run.log").read_text()
