"""``agent`` in the foreground through real turns: the fake model scripts the parent's tool
calls and answers the child, each routed by its first user message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, Error, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, write_config
from tests.integration.children.support import (
    calls_then,
    first_user,
    last_result,
    of,
    parsed,
    routed,
    tool_names,
)
from tests.store_helpers import fetch_row, fetch_rows

PARENT = ["agent.dispatch", "fs.read:persona", "fs.write:thread", "git.read", "jobs.manage"]


def config(tmp_path: Path, fake: FakeAnthropic, capabilities: list[str] = PARENT, **extra: Any) -> Path:
    personas = {
        "assistant": {"capabilities": capabilities},
        "checker": {
            "capabilities": ["git.read", "memory.access:persona"],
            "system": "# Checker\n\nYou check.",
        },
    }
    return write_config(tmp_path, provider=provider_for(fake), personas=personas, extra=extra)


async def test_a_foreground_child_answers_on_the_model_asked_for_and_the_parent_gets_its_result(
    tmp_path: Path,
) -> None:
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(
                Call("agent", {"prompt": "CHILD count the files", "model": "fake:small-model"}),
                final=last_result,
            ),
            CHILD=lambda body: Reply(text="there are 3 files", input_tokens=11, output_tokens=5),
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
        db = gw.components.db
        child_run = await fetch_row(db, "SELECT * FROM child_runs")
        parent_run = await fetch_row(
            db, "SELECT id FROM runs WHERE id != ? ORDER BY id LIMIT 1", (child_run["run_id"],)
        )
    result = parsed(turn.text)
    assert result["result"] == "there are 3 files"
    assert result["usage"] == {"input_tokens": 11, "output_tokens": 5, "model_calls": 1}
    assert result["runId"] == child_run["run_id"]
    assert child_run["root_run_id"] == parent_run["id"] and child_run["depth"] == 1
    (child_request,) = of(fake.requests, "CHILD")
    assert child_request["model"] == "small-model"


async def test_an_unknown_model_is_an_error_naming_the_configured_providers_and_no_child_runs(
    tmp_path: Path,
) -> None:
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(Call("agent", {"prompt": "CHILD x", "model": "cloud:big"}), final=last_result),
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
        rows = await fetch_rows(gw.components.db, "SELECT * FROM child_runs")
    assert turn.text.startswith("ERROR ")
    assert "'cloud:big' is not configured" in turn.text and "(fake)" in turn.text
    assert rows == [] and of(fake.requests, "CHILD") == []


async def test_a_child_at_the_depth_limit_is_not_offered_agent_and_a_direct_call_is_refused(
    tmp_path: Path,
) -> None:
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(Call("agent", {"prompt": "CHILD1 delegate"}), final=last_result),
            CHILD1=calls_then(Call("agent", {"prompt": "CHILD2 deeper"}), final=last_result),
            CHILD2=calls_then(Call("agent", {"prompt": "CHILD3 deepest"}), final=last_result),
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
        depths = [r["depth"] for r in await fetch_rows(gw.components.db, "SELECT depth FROM child_runs")]
    assert "agent" in tool_names(of(fake.requests, "CHILD1")[0])
    assert "agent" not in tool_names(of(fake.requests, "CHILD2")[0])
    assert of(fake.requests, "CHILD3") == []
    assert sorted(depths) == [1, 2]
    # The depth-2 child's direct call was refused by the bridge; its refusal went up as its answer.
    assert "agent needs the capability 'agent.dispatch'" in turn.text


async def test_a_child_asked_to_call_a_tool_its_parent_lacks_is_refused_by_the_bridge(tmp_path: Path) -> None:
    # The checker profile allows memory.access, which the parent does not hold.
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(
                Call("agent", {"prompt": "CHILD remember", "agent_type": "checker"}), final=last_result
            ),
            CHILD=calls_then(Call("memory_access", {"operation": "list"}), final=last_result),
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
        audit = await fetch_rows(
            gw.components.db, "SELECT decision, detail FROM audit_log WHERE tool = 'memory_access'"
        )
    child_request = of(fake.requests, "CHILD")[0]
    assert tool_names(child_request) == {"git_read"}  # parent ∩ checker's allowlist
    assert "You check." in json.dumps(child_request["system"])  # the profile's prompt
    assert parsed(turn.text)["result"].startswith("ERROR memory_access needs the capability")
    assert [r["decision"] for r in audit] == ["refused"]


async def test_roots_outside_the_callers_workspaces_are_refused_with_the_roots_named(tmp_path: Path) -> None:
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(
                Call("agent", {"prompt": "CHILD a", "readRoots": ["/etc"]}),
                Call("agent", {"prompt": "CHILD b", "writeRoots": ["/shared/out"]}),
                Call("agent", {"prompt": "CHILD c", "cwd": "/workspace/../../x"}),
                final=lambda results: "\n".join(t for _, t in results),
            ),
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
    first, second, third = turn.text.split("\n")
    assert "readRoots[0] '/etc' is outside the workspaces this agent may use: /shared and /workspace" in first
    assert "writeRoots[0] '/shared/out' is outside the workspaces this agent may use: /workspace" in second
    assert "contains '..'" in third
    assert of(fake.requests, "CHILD") == []


async def test_write_roots_in_workspace_narrow_the_childs_file_labels(tmp_path: Path) -> None:
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(
                Call("agent", {"prompt": "CHILD write", "writeRoots": ["/workspace/out"]}),
                final=last_result,
            ),
            CHILD=calls_then(Call("read_file", {"file_path": "/shared/secret.txt"}), final=last_result),
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
    child_request = of(fake.requests, "CHILD")[0]
    assert {"read_file", "write_file"} <= tool_names(child_request)
    assert "[write roots: /workspace/out]" in first_user(child_request)
    # fs.read:persona narrowed to fs.read:thread: /shared is refused.
    assert "in a root this persona's labels do not open" in parsed(turn.text)["result"]


async def test_max_tool_use_iterations_winds_the_child_down_with_a_last_answer(tmp_path: Path) -> None:
    def busy(body: dict[str, Any]) -> Reply:
        if "[budget]" in str(body.get("system")):
            return Reply(text="partial answer")
        return Reply(tool_calls=[Call("git_read", {"subcommand": "status"})])

    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(
                Call("agent", {"prompt": "CHILD loop", "max_tool_use_iterations": 2}), final=last_result
            ),
            CHILD=busy,
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
    result = parsed(turn.text)
    assert result["result"].startswith("partial answer")
    assert result["toolCalls"] == ["git_read", "git_read"]
    assert len(of(fake.requests, "CHILD")) == 3


async def test_a_childs_progress_events_come_back_with_its_result(tmp_path: Path) -> None:
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(
                Call("agent", {"prompt": "CHILD long job", "progress_events": True}), final=last_result
            ),
            CHILD=calls_then(
                Call("emit_progress", {"message": "half way", "phase": "scan", "metadata": {"files": 3}}),
                final=lambda results: "finished",
            ),
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
    result = parsed(turn.text)
    assert result["result"] == "finished"
    assert [(p["message"], p["phase"], p["metadata"]) for p in result["progress"]] == [
        ("half way", "scan", {"files": 3})
    ]
    assert "emit_progress" in tool_names(of(fake.requests, "CHILD")[0])


async def test_attachments_must_be_images_inside_the_callers_workspaces(tmp_path: Path) -> None:
    import io

    from PIL import Image

    shared = tmp_path / "data" / "workspaces" / "assistant" / "shared"
    shared.mkdir(parents=True)
    picture = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(picture, "PNG")
    (shared / "pic.png").write_bytes(picture.getvalue())
    (shared / "notes.txt").write_text("not an image")
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(
                Call("agent", {"prompt": "CHILD look", "attachments": ["/shared/pic.png"]}),
                Call("agent", {"prompt": "CHILD text", "attachments": ["/shared/notes.txt"]}),
                Call("agent", {"prompt": "CHILD etc", "attachments": ["/etc/hostname"]}),
                final=lambda results: "\n".join(("ERROR " if e else "OK ") + t for e, t in results),
            ),
            CHILD=lambda body: Reply(text="seen"),
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
    ok, not_image, outside = turn.text.split("\n")
    assert ok.startswith("OK ")
    (looked,) = of(fake.requests, "CHILD look")
    assert "[attached images (open them with view_image): /shared/pic.png]" in str(looked["messages"][0])
    assert not_image.startswith("ERROR ") and "notes.txt" in not_image
    assert outside.startswith("ERROR ") and "outside the workspace" in outside
    assert of(fake.requests, "CHILD text") == [] and of(fake.requests, "CHILD etc") == []


async def test_children_count_against_the_root_runs_budget(tmp_path: Path) -> None:
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(
                Call("agent", {"prompt": "CHILD one"}),
                Call("agent", {"prompt": "CHILD two"}),
                final=lambda results: "\n".join(("ERROR " if e else "OK ") + t for e, t in results),
            ),
            CHILD=lambda body: Reply(text="done"),
        )
    )
    async with fake:
        write_config(
            tmp_path,
            provider=provider_for(fake),
            personas={"assistant": {"capabilities": PARENT, "budgets": {"max_children": 1}}},
        )
        async with running_gateway(tmp_path / "talon.yaml") as gw:
            turn = await say(gw, "go")
    first, second = turn.text.split("\n")
    assert first.startswith("OK ")
    assert second.startswith("ERROR ") and "max_children 1" in second
    assert len(of(fake.requests, "CHILD")) == 1


async def test_a_child_whose_model_fails_is_an_error_naming_the_model(tmp_path: Path) -> None:
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(Call("agent", {"prompt": "CHILD x", "model": "fake:flaky"}), final=last_result),
            CHILD=lambda body: Error(400, "model flaky does not exist"),
        )
    )
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
        run = await fetch_row(
            gw.components.db, "SELECT r.status FROM runs r JOIN child_runs c ON c.run_id = r.id"
        )
    assert turn.text.startswith("ERROR the child agent's model fake:flaky failed")
    assert run["status"] == "failed"


async def test_a_child_starts_with_the_trees_findings_and_its_run_is_in_the_parents_trace(
    tmp_path: Path,
) -> None:
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(
                Call("workspace_publish", {"type": "finding", "subject": "db", "content": "PORT-IS-5433"}),
                Call("agent", {"prompt": "CHILD check the port", "id_prefix": "porter"}),
                final=last_result,
            ),
            CHILD=lambda body: Reply(text="checked", input_tokens=7, output_tokens=3),
        )
    )
    async with fake, running_gateway(config(tmp_path, fake, [*PARENT, "workspace.share"])) as gw:
        await say(gw, "go")
        db = gw.components.db
        child_run = await fetch_row(db, "SELECT * FROM child_runs")
        events = await fetch_rows(db, "SELECT * FROM run_events ORDER BY id")
    (child_request,) = of(fake.requests, "CHILD")
    assert "PORT-IS-5433" in json.dumps(child_request["system"])
    parent_children = [
        json.loads(e["payload"])
        for e in events
        if e["run_id"] == child_run["root_run_id"] and e["kind"] == "child"
    ]
    assert [(p["event"], p["child_run_id"]) for p in parent_children] == [
        ("started", child_run["run_id"]),
        ("ended", child_run["run_id"]),
    ]
    assert parent_children[-1]["status"] == "completed"
    child_calls = [e for e in events if e["run_id"] == child_run["run_id"] and e["kind"] == "model_call"]
    assert len(child_calls) == 1 and child_calls[0]["root_run_id"] == child_run["root_run_id"]


async def test_a_child_may_store_facts_but_neither_writes_procedures_nor_replaces_hot_memory(
    tmp_path: Path,
) -> None:
    child = calls_then(
        Call("memory_update", {"target": "hot", "action": "set", "content": "CHILD-HOT"}),
        Call("procedure_write", {"name": "child-steps", "content": "1. step"}),
        final=lambda results: json.dumps([[error, text[:200]] for error, text in results]),
    )
    fake = FakeAnthropic(
        responder=routed(
            go=calls_then(Call("agent", {"prompt": "CHILD remember things"}), final=last_result),
            CHILD=child,
        )
    )
    async with fake, running_gateway(config(tmp_path, fake, [*PARENT, "memory.access:persona"])) as gw:
        turn = await say(gw, "go")
        hot = await fetch_rows(gw.components.db, "SELECT * FROM memory_hot WHERE content LIKE '%CHILD-HOT%'")
    parent_request = of(fake.requests, "go")[0]
    assert "procedure_write" in tool_names(parent_request)
    child_request = of(fake.requests, "CHILD")[0]
    assert "memory_update" in tool_names(child_request)
    assert "procedure_write" not in tool_names(child_request)
    (hot_result, procedure_result) = json.loads(parsed(turn.text)["result"])
    assert hot_result[0] and "cannot replace hot memory" in hot_result[1]
    assert procedure_result[0] and "not to child agents" in procedure_result[1]
    assert hot == []
