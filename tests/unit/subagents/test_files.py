"""file-searcher and spark-coder: ranked snippets and file operations, confined to the calling
thread's workspace roots (another thread's files stay out of reach)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import RefusedError
from gateway.store.db import Database
from tests.fakes.model_api import FakeAnthropic, FakeOpenAI
from tests.unit.subagents.support import Env, add_thread, json_reply, make_persona, request_text
from tools.base import ToolContext
from tools.host.subagent_invoke import TOOL
from tools.workspace.roots import thread_workspace


async def invoke(ctx: ToolContext, name: str, **input: Any) -> dict[str, Any]:
    return await TOOL.handler(ctx, {"name": name, "input": input})


async def make_ctx(env: Env, db: Database, chat: str = "C1", **persona: Any) -> ToolContext:
    return env.ctx(db, await add_thread(db, chat), make_persona(env.root, **persona))


def workspace(ctx: ToolContext) -> Path:
    """The calling thread's /workspace on the host."""
    return thread_workspace(ctx.settings, ctx.persona.name, ctx.thread_id)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def test_search_returns_ranked_snippets(env: Env, anthropic: FakeAnthropic, db: Database) -> None:
    ctx = await make_ctx(env, db)
    root = workspace(ctx)
    write(
        root / "notes" / "billing.md",
        "# Billing\n\nInvoices are sent on the first day.\nRefunds take a week.\n",
    )
    write(root / "src" / "invoice.py", "def send_invoice(customer):\n    return mail(customer)\n")
    write(root / "readme.txt", "Nothing relevant here.\n")
    anthropic.script(
        json_reply({"results": [{"id": 1, "relevance": 0.9, "reason": "defines it"}, {"id": 0}, {"id": 99}]})
    )
    result = await invoke(ctx, "file-searcher", query="how are invoices sent")
    [body] = anthropic.requests
    assert body["model"] == "claude-haiku-4-5"
    sent = request_text(body)
    assert "/workspace/notes/billing.md:1" in sent and "/workspace/src/invoice.py:1" in sent
    assert "Nothing relevant" not in sent
    content = body["messages"][0]["content"][0]["text"]
    ids = {path: int(i) for i, path in re.findall(r"^\[(\d+)\] (\S+):\d+$", content, re.M)}
    assert set(ids) == {"/workspace/notes/billing.md", "/workspace/src/invoice.py"}
    by_id = {v: k for k, v in ids.items()}
    data = result["data"]
    assert data["searched_files"] == 3
    # The model's order, its relevance and reason; the made-up id 99 is dropped.
    assert [(r["path"], r["relevance"], r.get("reason")) for r in data["results"]] == [
        (by_id[1], 0.9, "defines it"),
        (by_id[0], None, None),
    ]
    billing = next(r for r in data["results"] if r["path"] == "/workspace/notes/billing.md")
    assert billing["line"] == 1 and "Invoices are sent on the first day." in billing["snippet"]


async def test_workspace_is_created_and_no_match_skips_the_model(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    ctx = await make_ctx(env, db)
    result = await invoke(ctx, "file-searcher", query="anything")
    assert workspace(ctx).is_dir()
    assert result["data"] == {"results": [], "searched_files": 0}
    assert anthropic.requests == []


async def test_search_never_reads_outside_the_workspace(
    env: Env, anthropic: FakeAnthropic, db: Database, tmp_path: Path
) -> None:
    ctx = await make_ctx(env, db)
    root = workspace(ctx)
    outside = tmp_path / "outside"
    write(outside / "secret.txt", "the password is hunter2\n")
    write(root / "inside.txt", "password rotation happens monthly\n")
    os.symlink(outside / "secret.txt", root / "link.txt")  # a file link leading out
    os.symlink(outside, root / "linked-dir")  # a directory link leading out
    os.symlink("inside.txt", root / "alias.txt")  # a link that stays inside is fine
    anthropic.script(json_reply({"results": [{"id": 0}]}))
    result = await invoke(ctx, "file-searcher", query="password")
    sent = request_text(anthropic.requests[0])
    assert "hunter2" not in sent
    assert "password rotation" in sent
    assert "hunter2" not in str(result)
    for bad, why in [
        ("../outside", "climbs above /workspace with '..'"),
        ("/workspace/../outside", "climbs above /workspace with '..'"),
        (str(outside), "is outside the workspace; this call may use /workspace"),
        ("linked-dir", "is a symbolic link .* pointing outside"),
    ]:
        with pytest.raises(RefusedError, match=why):
            await invoke(ctx, "file-searcher", query="password", path=bad)
    assert len(anthropic.requests) == 1


async def test_another_threads_files_are_out_of_reach(
    env: Env, anthropic: FakeAnthropic, openai: FakeOpenAI, db: Database
) -> None:
    thread_a = await make_ctx(env, db, "A")
    thread_b = await make_ctx(env, db, "B")
    write(workspace(thread_a) / "plans.md", "the merger closes in march\n")
    write(workspace(thread_b) / "todo.md", "merger paperwork is due\n")
    anthropic.script(json_reply({"results": [{"id": 0}]}))
    found = await invoke(thread_b, "file-searcher", query="merger")
    sent = request_text(anthropic.requests[0])
    assert "paperwork" in sent and "march" not in sent
    assert [r["path"] for r in found["data"]["results"]] == ["/workspace/todo.md"]
    assert found["data"]["searched_files"] == 1
    a_host = workspace(thread_a)
    for path in (str(a_host), f"/workspace/../{thread_a.thread_id}", "/shared"):
        with pytest.raises(RefusedError):
            await invoke(thread_b, "file-searcher", query="merger", path=path)
    for files in ([str(a_host / "plans.md")], [f"../{thread_a.thread_id}/plans.md"]):
        with pytest.raises(RefusedError, match=r"input\.files entry"):
            await invoke(thread_b, "spark-coder", task="summarize", files=files)
    assert len(anthropic.requests) == 1 and openai.requests == []


async def test_shared_files_only_when_the_labels_open_them(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    shared = env.settings.data_path / "workspaces" / "alice" / "shared"
    write(shared / "handbook.md", "holiday policy: twenty days\n")
    closed = await make_ctx(env, db, "A")
    assert (await invoke(closed, "file-searcher", query="holiday policy"))["data"]["searched_files"] == 0
    opened = await make_ctx(env, db, "B", capabilities=("subagent.invoke", "fs.read:persona"))
    anthropic.script(json_reply({"results": [{"id": 0}]}))
    result = await invoke(opened, "file-searcher", query="holiday policy")
    assert [r["path"] for r in result["data"]["results"]] == ["/shared/handbook.md"]
    assert "twenty days" in request_text(anthropic.requests[0])


async def test_search_skips_binary_and_oversized_files(
    env: Env, anthropic: FakeAnthropic, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.subagents import files

    monkeypatch.setattr(files, "MAX_FILE_BYTES", 100)
    ctx = await make_ctx(env, db)
    root = workspace(ctx)
    (root).mkdir(parents=True)
    (root / "blob.bin").write_bytes(b"\x00\x01token\x00")
    write(root / "big.txt", "token " * 50)
    result = await invoke(ctx, "file-searcher", query="token")
    assert result["data"]["results"] == [] and anthropic.requests == []


async def test_spark_coder_returns_operations_without_applying_them(
    env: Env, openai: FakeOpenAI, db: Database
) -> None:
    ctx = await make_ctx(env, db)
    write(workspace(ctx) / "app.py", "print('v1')\n")
    operations = [
        {"op": "replace", "path": "app.py", "content": "print('v2')\n"},
        {"op": "create", "path": "tests/test_app.py", "content": "def test(): pass\n"},
        {"op": "delete", "path": "old.py"},
    ]
    openai.script(json_reply({"operations": operations, "summary": "Bumped to v2 with a test."}))
    result = await invoke(ctx, "spark-coder", task="print v2 and add a test", files=["app.py", "new.py"])
    [body] = openai.requests
    assert body["model"] == "gpt-5.4-spark"
    sent = request_text(body)
    assert "print('v1')" in sent and "new.py" in sent and "does not exist yet" in sent
    assert result["data"] == {"operations": operations, "summary": "Bumped to v2 with a test."}
    assert result["summary"] == "Bumped to v2 with a test."
    assert (workspace(ctx) / "app.py").read_text() == "print('v1')\n"
    assert not (workspace(ctx) / "tests").exists()


async def test_spark_coder_paths_leaving_the_workspace_are_sent_back_for_repair(
    env: Env, openai: FakeOpenAI, db: Database
) -> None:
    ctx = await make_ctx(env, db)
    openai.script(
        json_reply({"operations": [{"op": "create", "path": "../../etc/cron.d/x", "content": "boom"}]}),
        json_reply({"operations": [{"op": "create", "path": "cron/x", "content": "ok"}]}),
    )
    result = await invoke(ctx, "spark-coder", task="schedule something")
    assert "operations[0].path '../../etc/cron.d/x' climbs above /workspace with '..'" in request_text(
        openai.requests[1]
    )
    assert result["data"]["operations"] == [{"op": "create", "path": "cron/x", "content": "ok"}]


async def test_spark_coder_schema_requires_content_for_create(
    env: Env, openai: FakeOpenAI, db: Database
) -> None:
    ctx = await make_ctx(env, db)
    openai.script(
        json_reply({"operations": [{"op": "create", "path": "a.py"}]}),
        json_reply({"operations": [{"op": "rename", "path": "a.py"}]}),
    )
    with pytest.raises(
        RefusedError, match=r"even after one repair attempt: at operations\[0\]\.op: 'rename' is not one of"
    ):
        await invoke(ctx, "spark-coder", task="x")
    assert "'content' is a required property" in request_text(openai.requests[1])


async def test_spark_coder_without_openai_api_key_is_unavailable(
    make: Callable[..., Env], anthropic: FakeAnthropic, openai: FakeOpenAI, db: Database
) -> None:
    env = make({"anthropic": anthropic, "openai": openai}, environ={})
    ctx = await make_ctx(env, db)
    with pytest.raises(RefusedError) as caught:
        await invoke(ctx, "spark-coder", task="write hello world")
    assert str(caught.value) == (
        "sub-agent 'spark-coder' is unavailable: it requires OPENAI_API_KEY in the daemon's environment "
        "(or the .env beside talon.yaml), and it is not set"
    )
    assert openai.requests == []


async def test_spark_coder_rejects_context_files_outside_the_workspace(
    env: Env, openai: FakeOpenAI, db: Database
) -> None:
    ctx = await make_ctx(env, db)
    with pytest.raises(RefusedError, match=r"input\.files entry '/etc/passwd' is outside the workspace"):
        await invoke(ctx, "spark-coder", task="x", files=["/etc/passwd"])
    assert openai.requests == []
