"""The ``talon`` command cannot hurt: run as a user would, in the wrong folder, without a
database, into a closed pipe. The doctor and the operator's commands are in
test_cli_doctor.py and test_cli_operator.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cli_support import init_bot as _init
from tests.e2e.cli_support import tree as _tree
from tests.e2e.daemon import TALON, Daemon, talon, talon_env
from tests.fakes.model_api import FakeOpenAI

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


def _one_line_without_traceback(err: str) -> None:
    assert "Traceback" not in err
    assert err.strip() and err.strip().count("\n") == 0, err


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
