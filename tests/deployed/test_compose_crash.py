"""kill -9 in the middle of a compose graph: the retried turn reuses the nodes that had
finished instead of asking the model again, and the chat gets exactly one final reply.

``talon run`` is a subprocess; the model stand-in (:mod:`tests.fakes.compose_model`) runs in
a process of its own and counts its calls per node.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from tests.deployed.support import (
    deployed_daemon,
    fake_process,
    log_failures,
    outbox_rows,
    write_deployed_config,
)
from tests.e2e.daemon import TALON, talon_env

pytestmark = pytest.mark.timeout(240)


def _counts(path: Path) -> dict[str, int]:
    return json.loads(path.read_text()) if path.exists() else {}


async def _until(check, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.1)


async def test_kill_9_mid_graph_then_the_retry_reuses_finished_nodes_and_replies_once(tmp_path: Path) -> None:
    counts = tmp_path / "counts.json"
    async with fake_process(
        "tests.fakes.compose_model", tmp_path, "--counts", str(counts), "--hold", "120"
    ) as model:
        config = write_deployed_config(
            tmp_path,
            model_url=model.url,
            model_kind="anthropic",
            channels=[{"name": "console", "type": "console"}],
        )
        persona = tmp_path / "personas" / "assistant" / "persona.yaml"
        persona.write_text(persona.read_text() + "capabilities: [agent.dispatch]\n", encoding="utf-8")
        async with deployed_daemon(config) as daemon:
            chat = await asyncio.create_subprocess_exec(
                *TALON,
                "chat",
                "-c",
                str(config),
                "-m",
                "compose",
                env=talon_env(),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            # a and b finished (and were recorded); c is waiting on the model.
            await _until(lambda: _counts(counts).get("c") == 1, 60)
            await daemon.kill()
        chat.kill()
        await chat.wait()
        assert [r for r in outbox_rows(tmp_path / "data") if r["text"].startswith("composed:")] == []
        async with deployed_daemon(config) as daemon:
            await _until(
                lambda: any(r["text"].startswith("composed:") for r in outbox_rows(tmp_path / "data")), 90
            )
            await daemon.stop()
            second_log = daemon.log()
    replies = [r for r in outbox_rows(tmp_path / "data") if r["text"].startswith("composed:")]
    assert len(replies) == 1
    result = json.loads(replies[0]["text"].removeprefix("composed: "))
    assert result["outcome"] == "completed"
    assert result["reused"] == ["a", "b"]
    final = _counts(counts)
    assert (final["a"], final["b"], final["c"]) == (1, 1, 2)  # only the unfinished node was asked again
    assert log_failures(second_log) == [], log_failures(second_log)
