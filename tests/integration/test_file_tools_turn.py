"""The file tools in real turns: the fake model writes, edits, reads, greps and queries files in
its thread's workspace, every escape it tries is refused with the roots named, another thread
never sees the files, and a persona without the labels can neither see nor call the tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_texts, write_config
from tools.bridge import RunIdentity

LABELS = ["fs.read:thread", "fs.write:thread"]
ESCAPES = ["/etc/passwd", "../../../../talon.db", "/proc/self/root/etc/passwd", "~/.ssh/id_rsa"]


def _script(calls: list[Call]) -> Any:
    """A model that makes ``calls`` one at a time, then answers with every result as JSON."""

    def respond(body: dict[str, Any]) -> Reply:
        results = tool_texts(body)
        if len(results) < len(calls):
            return Reply(tool_calls=[calls[len(results)]])
        return Reply(text=json.dumps(results))

    return respond


async def test_a_turn_writes_edits_reads_searches_and_queries_its_files(tmp_path: Path) -> None:
    calls = [
        Call(
            "write_file",
            {"file_path": "/workspace/report/data.json", "content": '{"rows": [{"id": 7}, {"id": 9}]}'},
        ),
        Call(
            "edit_file", {"file_path": "report/data.json", "old_string": '"id": 9', "new_string": '"id": 10'}
        ),
        Call("json_query", {"path": "/workspace/report/data.json", "query": ".rows[] | .id"}),
        Call("grep", {"pattern": "rows"}),
        Call("read_file", {"file_path": "/workspace/report/data.json"}),
        *[Call("read_file", {"file_path": path}) for path in ESCAPES],
    ]
    async with FakeAnthropic(responder=_script(calls)) as fake:
        config = write_config(
            tmp_path, provider=provider_for(fake), personas={"assistant": {"capabilities": LABELS}}
        )
        async with running_gateway(config) as gw:
            turn = await say(gw, "make the report", timeout=60)
        offered = {t["name"] for t in fake.requests[0]["tools"]}
    results = json.loads(turn.text)
    assert offered >= {"read_file", "write_file", "edit_file", "patch_apply", "glob", "grep", "json_query"}
    assert json.loads(results[0])["after_hash"].startswith("sha256:")
    assert json.loads(results[2])["result"] == [7, 10]
    assert results[3].startswith("/workspace/report/data.json:1:")
    assert results[4].startswith('     1\t{"rows": [{"id": 7}, {"id": 10}]}')
    for refusal in results[5:]:
        assert "this call may use /workspace (this thread's files)" in refusal
        assert "root:" not in refusal
    thread_id = turn.intake.thread_id
    host = (
        tmp_path / "data" / "workspaces" / "assistant" / "threads" / str(thread_id) / "report" / "data.json"
    )
    assert json.loads(host.read_text()) == {"rows": [{"id": 7}, {"id": 10}]}


async def test_another_thread_does_not_see_the_files(tmp_path: Path) -> None:
    calls_a = [Call("write_file", {"file_path": "secret.txt", "content": "thread A only"})]
    calls_b = [
        Call("glob", {"pattern": "**/*"}),
        Call("read_file", {"file_path": "secret.txt"}),
        Call("grep", {"pattern": "thread A"}),
    ]
    state = {"calls": calls_a}

    def respond(body: dict[str, Any]) -> Reply:
        return _script(state["calls"])(body)

    async with FakeAnthropic(responder=respond) as fake:
        config = write_config(
            tmp_path, provider=provider_for(fake), personas={"assistant": {"capabilities": LABELS}}
        )
        async with running_gateway(config) as gw:
            first = await say(gw, "keep a secret", thread="a", timeout=60)
            state["calls"] = calls_b
            second = await say(gw, "what is in the workspace?", thread="b", timeout=60)
    assert first.intake.thread_id != second.intake.thread_id
    listing, read, search = json.loads(second.text)
    assert json.loads(listing)["matches"] == []
    assert "does not exist" in read
    assert search.startswith("no matches")


async def test_without_the_labels_the_tools_are_neither_offered_nor_callable(tmp_path: Path) -> None:
    async with FakeAnthropic(responder=lambda body: Reply(text="ok")) as fake:
        config = write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": ["memory.access:thread"]}},
        )
        async with running_gateway(config) as gw:
            await say(gw, "hello")
            bridge = gw.components.host_tools.bridge
            identity: RunIdentity = bridge.register(10_001, 1, "assistant")
            refused = await bridge.call(identity, "read_file", {"file_path": "/workspace/a.txt"})
            written = await bridge.call(identity, "write_file", {"file_path": "a.txt", "content": "x"})
        offered = {t["name"] for t in fake.requests[0]["tools"]}
    assert offered == {"memory_access", "memory_search", "memory_update", "procedure_write"}
    assert refused.refused and "needs the capability 'fs.read:thread|persona'" in refused.content
    assert written.refused and "fs.write:thread|persona" in written.content
    assert not (tmp_path / "data" / "workspaces" / "assistant" / "threads" / "1" / "a.txt").exists()
