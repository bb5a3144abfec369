"""Persona-to-persona tasks and background agents through the real gateway, with the
model stand-in answering per persona."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.model_script import last_user_text
from tests.harness import provider_for, running_gateway, say, tool_texts, write_config
from tests.store_helpers import fetch_row, fetch_rows

PERSONAS = {
    "alice": {
        "capabilities": ["persona.send:*", "subagent.background"],
        "system": "# Alice the coordinator\n",
    },
    "bob": {"capabilities": ["persona.send:carol"], "system": "# Bob the researcher\n"},
    "carol": {"capabilities": ["persona.send:*"], "system": "# Carol the checker\n"},
}


def _system(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    return system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)


def router(**by_persona: Callable[[dict[str, Any]], Reply]) -> Callable[[dict[str, Any]], Reply]:
    """Answer each request with the responder of the persona whose prompt it carries."""

    def respond(body: dict[str, Any]) -> Reply:
        system = _system(body)
        for name, responder in by_persona.items():
            if f"# {name.capitalize()}" in system:
                return responder(body)
        return Reply(text="?")

    return respond


def tool_then(call: Call, final: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], Reply]:
    """First request: make ``call``; once its result is in, answer ``final(body)``."""

    def respond(body: dict[str, Any]) -> Reply:
        if not tool_texts(body) and not last_user_text(body).startswith("[system]"):
            return Reply(tool_calls=[call])
        return Reply(text=final(body))

    return respond


def of(fake: FakeAnthropic, persona: str) -> list[dict[str, Any]]:
    """The requests the model received for ``persona``, in order."""
    return [r for r in fake.requests if f"# {persona.capitalize()}" in _system(r)]


def config(tmp_path: Path, fake: FakeAnthropic, **extra: Any) -> Path:
    return write_config(
        tmp_path,
        provider=provider_for(fake),
        personas=PERSONAS,
        extra={"bindings": [{"channel": "console", "persona": "alice"}], **extra},
    )


async def _wait(predicate: Callable[[], Any], timeout: float = 20) -> Any:
    async with asyncio.timeout(timeout):
        while not (value := await predicate()):
            await asyncio.sleep(0.02)
    return value


async def test_fire_and_forget_result_comes_back_into_the_callers_thread(tmp_path: Path) -> None:
    responder = router(
        alice=tool_then(
            Call("persona_send", {"target_persona": "bob", "message": "What is 2+2?"}),
            lambda body: f"alice saw: {last_user_text(body)}",
        ),
        bob=lambda body: Reply(text="four"),
    )
    async with FakeAnthropic(responder=responder) as fake:
        async with running_gateway(config(tmp_path, fake)) as gw:
            first = await say(gw, "ask bob")
            sent = json.loads(tool_texts(of(fake, "alice")[1])[0])
            assert sent["state"] == "submitted"

            async def followup() -> Any:
                return await fetch_row(
                    gw.components.db,
                    "SELECT text FROM messages WHERE thread_id = ? AND role = 'assistant' AND id > "
                    "(SELECT MAX(id) FROM messages WHERE thread_id = ? AND role = 'system')",
                    (first.intake.thread_id, first.intake.thread_id),
                )

            reply = await _wait(followup)
            task = await fetch_row(
                gw.components.db, "SELECT * FROM a2a_tasks WHERE id = ?", (sent["task_id"],)
            )
        assert task["state"] == "completed" and task["result"] == "four"
        assert "delegated to bob completed" in reply["text"] and "four" in reply["text"]
        bob_request = of(fake, "bob")[0]
        assert last_user_text(bob_request) == "What is 2+2?"  # a fresh context: only the task


async def test_await_reply_returns_the_result_inline(tmp_path: Path) -> None:
    responder = router(
        alice=tool_then(
            Call(
                "persona_send",
                {"target_persona": "bob", "message": "capital of France?", "await_reply": True},
            ),
            lambda body: f"bob said {json.loads(tool_texts(body)[0])['result']}",
        ),
        bob=lambda body: Reply(text="Paris"),
    )
    async with FakeAnthropic(responder=responder) as fake:
        async with running_gateway(config(tmp_path, fake, queue={"workers": 1})) as gw:
            # One worker: the waiting caller parks its slot so bob can still run.
            turn = await say(gw, "ask bob and wait")
            await asyncio.sleep(0.3)
            system_rows = await fetch_rows(gw.components.db, "SELECT 1 FROM messages WHERE role = 'system'")
        assert turn.text == "bob said Paris"
        assert system_rows == []  # answered inline: nothing posted back later


async def test_await_reply_timeout_then_result_is_delivered(tmp_path: Path) -> None:
    responder = router(
        alice=tool_then(
            Call("persona_send", {"target_persona": "bob", "message": "slow job", "await_reply": True}),
            lambda body: "noted" if not last_user_text(body).startswith("[system]") else "bob finished late",
        ),
        bob=lambda body: Reply(text="done late", delay=1.5),
    )
    async with FakeAnthropic(responder=responder) as fake:
        async with running_gateway(config(tmp_path, fake, delegation={"await_timeout": 0.5})) as gw:
            turn = await say(gw, "go")
            result = json.loads(tool_texts(of(fake, "alice")[1])[0])
            delivered = await _wait(
                lambda: fetch_row(gw.components.db, "SELECT text FROM messages WHERE role = 'system'")
            )
        assert result["state"] == "timeout" and turn.text == "noted"
        assert "done late" in delivered["text"]


async def test_scope_hops_and_cycles_are_refused_with_reasons(tmp_path: Path) -> None:
    responder = router(
        alice=tool_then(
            Call(
                "persona_send", {"target_persona": "bob", "message": "check with carol", "await_reply": True}
            ),
            lambda body: "alice done",
        ),
        bob=tool_then(
            Call("persona_send", {"target_persona": "alice", "message": "loop back", "await_reply": True}),
            lambda body: f"bob got: {tool_texts(body)[0]}",
        ),
    )
    async with FakeAnthropic(responder=responder) as fake:
        async with running_gateway(config(tmp_path, fake)) as gw:
            await say(gw, "start")
            task = await _wait(
                lambda: fetch_row(gw.components.db, "SELECT result FROM a2a_tasks WHERE state = 'completed'")
            )
            audit = await fetch_rows(
                gw.components.db, "SELECT detail FROM audit_log WHERE decision = 'refused'"
            )
        # bob holds persona.send:carol only: reaching alice is refused by scope before any cycle check.
        assert "bob got:" in task["result"]
        assert any("alice" in (row["detail"] or "") for row in audit)


async def test_cycle_refused_when_scope_allows(tmp_path: Path) -> None:
    responder = router(
        alice=tool_then(
            Call("persona_send", {"target_persona": "carol", "message": "hi", "await_reply": True}),
            lambda body: "alice done",
        ),
        carol=tool_then(
            Call("persona_send", {"target_persona": "alice", "message": "back", "await_reply": True}),
            lambda body: tool_texts(body)[0],
        ),
    )
    async with FakeAnthropic(responder=responder) as fake:
        async with running_gateway(config(tmp_path, fake)) as gw:
            await say(gw, "start")
            task = await _wait(
                lambda: fetch_row(gw.components.db, "SELECT result FROM a2a_tasks WHERE state = 'completed'")
            )
        assert "cycle" in task["result"] and "alice -> carol -> alice" in task["result"]


async def test_task_status_is_visible_only_from_the_starting_thread(tmp_path: Path) -> None:
    responder = router(
        alice=tool_then(Call("persona_send", {"target_persona": "bob", "message": "x"}), lambda body: "ok"),
        bob=lambda body: Reply(text="y"),
    )
    async with FakeAnthropic(responder=responder) as fake:
        async with running_gateway(config(tmp_path, fake)) as gw:
            await say(gw, "go", thread="one")
            task_id = json.loads(tool_texts(of(fake, "alice")[1])[0])["task_id"]
            other = await say(gw, "hello", thread="two")
            status_tool = __import__("tools.registry", fromlist=["by_mcp_name"]).by_mcp_name(
                "persona_task_status"
            )
            from gateway.errors import RefusedError
            from tools.base import ToolContext

            ctx = ToolContext(
                other.intake.thread_id,
                gw.personas["alice"],
                gw.components.db,
                gw.settings,
                gw.components.tool_services,
            )
            try:
                await status_tool.handler(ctx, {"task_id": task_id})
                raise AssertionError("another thread must not see the task")
            except RefusedError as exc:
                assert "no task" in str(exc)


async def test_background_agent_reports_back_into_the_thread(tmp_path: Path) -> None:
    responder = router(
        alice=tool_then(
            Call("background_agent", {"action": "spawn", "prompt": "summarize the logs", "profile": "bob"}),
            lambda body: f"alice: {last_user_text(body)[:60]}",
        ),
        bob=lambda body: Reply(text="logs look fine"),
    )
    async with FakeAnthropic(responder=responder) as fake:
        async with running_gateway(config(tmp_path, fake)) as gw:
            turn = await say(gw, "check the logs in the background")
            spawned = json.loads(tool_texts(of(fake, "alice")[1])[0])
            notice = await _wait(
                lambda: fetch_row(gw.components.db, "SELECT text FROM messages WHERE role = 'system'")
            )
            task = await fetch_row(
                gw.components.db, "SELECT * FROM background_tasks WHERE id = ?", (spawned["taskId"],)
            )
        assert spawned["state"] == "queued" and spawned["timeoutMinutes"] >= 15
        assert turn.status == "completed"
        assert task["state"] == "completed" and task["result"] == "logs look fine"
        assert "logs look fine" in notice["text"]
        bob_request = of(fake, "bob")[0]
        assert "background_agent" not in json.dumps(bob_request.get("tools", []))


async def test_a_task_interrupted_by_a_restart_runs_again(tmp_path: Path) -> None:
    slow_bob = {"delay": 30.0}
    responder = router(
        alice=tool_then(
            Call("persona_send", {"target_persona": "bob", "message": "long research"}),
            lambda body: f"alice relays: {last_user_text(body)[-40:]}",
        ),
        bob=lambda body: Reply(text="research result", delay=slow_bob["delay"]),
    )
    async with FakeAnthropic(responder=responder) as fake:
        cfg = config(tmp_path, fake)
        async with running_gateway(cfg) as gw:
            await say(gw, "delegate")
            await _wait(lambda: asyncio.sleep(0, result=bool(of(fake, "bob"))))
            # Stopping now: bob's turn does not finish within the grace period.
        slow_bob["delay"] = 0.0
        async with running_gateway(cfg) as gw:
            task = await _wait(
                lambda: fetch_row(gw.components.db, "SELECT * FROM a2a_tasks WHERE state = 'completed'")
            )
            notice = await _wait(
                lambda: fetch_row(gw.components.db, "SELECT text FROM messages WHERE role = 'system'")
            )
        assert task["result"] == "research result"
        assert "research result" in notice["text"]
        assert len(of(fake, "bob")) == 2  # run once before the restart (cut off), once after


async def test_a_background_session_cannot_spawn_sessions(tmp_path: Path) -> None:
    responder = router(
        alice=tool_then(
            Call("background_agent", {"action": "spawn", "prompt": "nested work"}),
            lambda body: f"alice: {(tool_texts(body) or [''])[0][:80]}",
        ),
    )
    async with FakeAnthropic(responder=responder) as fake:
        async with running_gateway(config(tmp_path, fake)) as gw:
            await say(gw, "start background work")
            task = await _wait(
                lambda: fetch_row(
                    gw.components.db, "SELECT * FROM background_tasks WHERE state = 'completed'"
                )
            )
            spawned = await fetch_rows(gw.components.db, "SELECT id FROM background_tasks")
        session_requests = [r for r in of(fake, "alice") if "nested work" in last_user_text(r)]
        assert session_requests
        assert all("background_agent" not in json.dumps(r.get("tools", [])) for r in session_requests)
        assert len(spawned) == 1  # the session's own attempt was refused
        assert "needs the capability 'subagent.background'" in task["result"]


async def test_background_task_cancel_and_visibility(tmp_path: Path) -> None:
    from gateway.errors import RefusedError
    from tools.base import ToolContext
    from tools.registry import by_mcp_name

    responder = router(
        alice=tool_then(
            Call("background_agent", {"action": "spawn", "prompt": "very long job", "profile": "bob"}),
            lambda body: "spawned",
        ),
        bob=lambda body: Reply(text="never", delay=30),
    )
    tool = by_mcp_name("background_agent")
    assert tool is not None
    async with FakeAnthropic(responder=responder) as fake:
        async with running_gateway(config(tmp_path, fake)) as gw:
            turn = await say(gw, "start it", thread="one")
            task_id = json.loads(tool_texts(of(fake, "alice")[1])[0])["taskId"]
            await _wait(lambda: asyncio.sleep(0, result=bool(of(fake, "bob"))))  # the session is running
            other = await say(gw, "hello", thread="two")
            stranger = ToolContext(
                other.intake.thread_id,
                gw.personas["alice"],
                gw.components.db,
                gw.settings,
                gw.components.tool_services,
            )
            try:
                await tool.handler(stranger, {"action": "status", "taskId": task_id})
                raise AssertionError("another thread must not see the task")
            except RefusedError as exc:
                assert "no background task" in str(exc)
            owner = ToolContext(
                turn.intake.thread_id,
                gw.personas["alice"],
                gw.components.db,
                gw.settings,
                gw.components.tool_services,
            )
            canceled = await tool.handler(owner, {"action": "cancel", "taskId": task_id})
            task = await _wait(
                lambda: fetch_row(
                    gw.components.db,
                    "SELECT * FROM background_tasks WHERE id = ? AND state = 'canceled'",
                    (task_id,),
                )
            )
            run = await _wait(
                lambda: fetch_row(
                    gw.components.db,
                    "SELECT status FROM runs WHERE thread_id = ? AND status = 'canceled'",
                    (task["thread_id"],),
                )
            )
        assert canceled["state"] == "canceled" and run["status"] == "canceled"


async def test_a_background_task_interrupted_by_a_restart_runs_again(tmp_path: Path) -> None:
    slow = {"delay": 30.0}
    responder = router(
        alice=tool_then(
            Call("background_agent", {"action": "spawn", "prompt": "index everything", "profile": "bob"}),
            lambda body: "spawned",
        ),
        bob=lambda body: Reply(text="indexed", delay=slow["delay"]),
    )
    async with FakeAnthropic(responder=responder) as fake:
        cfg = config(tmp_path, fake)
        async with running_gateway(cfg) as gw:
            await say(gw, "start")
            await _wait(lambda: asyncio.sleep(0, result=bool(of(fake, "bob"))))
        slow["delay"] = 0.0
        async with running_gateway(cfg) as gw:
            task = await _wait(
                lambda: fetch_row(
                    gw.components.db, "SELECT * FROM background_tasks WHERE state = 'completed'"
                )
            )
            notice = await _wait(
                lambda: fetch_row(gw.components.db, "SELECT text FROM messages WHERE role = 'system'")
            )
        assert task["result"] == "indexed" and "indexed" in notice["text"]
        assert len(of(fake, "bob")) == 2


async def test_persona_list_cap_and_workspace_guards(tmp_path: Path) -> None:
    from gateway.errors import RefusedError
    from tools.base import ToolContext
    from tools.registry import by_mcp_name

    async with FakeAnthropic(responder=router(bob=lambda body: Reply(text="slow", delay=30))) as fake:
        async with running_gateway(config(tmp_path, fake, delegation={"max_active_per_target": 1})) as gw:
            turn = await say(gw, "hi")
            ctx = ToolContext(
                turn.intake.thread_id,
                gw.personas["alice"],
                gw.components.db,
                gw.settings,
                gw.components.tool_services,
            )
            cards = await by_mcp_name("persona_list").handler(ctx, {})
            send = by_mcp_name("persona_send").handler
            first = await send(ctx, {"target_persona": "bob", "message": "one"})
            try:
                await send(ctx, {"target_persona": "bob", "message": "two"})
                raise AssertionError("the second task must be refused")
            except RefusedError as exc:
                cap_error = str(exc)
            waited = await by_mcp_name("persona_task_status").handler(
                ctx, {"task_id": first["task_id"], "wait_ms": 200}
            )
            try:
                await by_mcp_name("background_agent").handler(
                    ctx, {"action": "spawn", "prompt": "x", "workingDirectory": "../../etc"}
                )
                raise AssertionError("a working directory outside the workspace must be refused")
            except RefusedError as exc:
                workdir_error = str(exc)
    assert cards == [
        {"name": "bob", "description": "Bob the researcher", "skills": []},
        {"name": "carol", "description": "Carol the checker", "skills": []},
    ]
    assert "1 unfinished tasks (limit 1)" in cap_error
    assert waited["state"] in ("submitted", "working")
    assert "outside the persona's workspace" in workdir_error
