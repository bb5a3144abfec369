"""``agent`` in the background and the job tools through real turns: the child runs as a
durable background task, reports progress, is steered at a tool-call boundary, and its result
is posted into the calling thread."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, FakeAnthropic, Reply
from tests.fakes.model_script import last_user_text
from tests.harness import provider_for, running_gateway, say, tool_results, write_config
from tests.integration.children.support import first_user, of, tool_names
from tests.store_helpers import fetch_row, fetch_rows

PARENT = ["agent.dispatch", "jobs.manage", "git.read"]
STEER = "focus on the tests"


def config(tmp_path: Path, fake: FakeAnthropic) -> Path:
    return write_config(
        tmp_path, provider=provider_for(fake), personas={"assistant": {"capabilities": PARENT}}
    )


def parent(body: dict[str, Any]) -> Reply:
    """The parent acts on the last chat line: ``start``, ``<tool> {args}`` or a posted result."""
    results = tool_results(body)
    text = last_user_text(body)
    if results:
        return Reply(text="\n".join(("ERROR " if e else "OK ") + t for e, t in results))
    if text == "start":
        args = {"prompt": "BG scan the repo", "mode": "background", "progress_events": True}
        return Reply(tool_calls=[Call("agent", args)])
    if "Background task" in text:
        return Reply(text="noted")
    name, _, raw = text.partition(" ")
    return Reply(tool_calls=[Call(name, json.loads(raw))])


def child(steered: asyncio.Event) -> Callable[[dict[str, Any]], Reply]:
    def respond(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[Call("emit_progress", {"message": "scanning", "phase": "scan"})])
        if len(results) == 1:  # slow enough for the parent to steer it meanwhile
            return Reply(tool_calls=[Call("git_read", {"subcommand": "status"})], delay=1.5)
        steering = [m for m in body["messages"] if m["role"] == "user" and STEER in json.dumps(m)]
        steered.set() if steering else None
        return Reply(text="done, " + ("steered" if steering else "not steered"))

    return respond


async def _wait(predicate: Callable[[], Any], timeout: float = 20) -> Any:
    async with asyncio.timeout(timeout):
        while not (value := await predicate()):
            await asyncio.sleep(0.02)
    return value


async def test_a_background_child_reports_progress_is_steered_and_its_result_is_posted_into_the_thread(
    tmp_path: Path,
) -> None:
    steered = asyncio.Event()

    def route(body: dict[str, Any]) -> Reply:
        return child(steered)(body) if first_user(body).startswith("BG") else parent(body)

    fake = FakeAnthropic(responder=route)
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        db = gw.components.db
        started = await say(gw, "start")
        job = json.loads(started.text.removeprefix("OK "))
        job_id = job["jobId"]
        assert job["state"] == "queued" and job["depth"] == 1
        await _wait(lambda: fetch_row(db, "SELECT 1 FROM child_progress WHERE job_id = ?", (job_id,)))
        steer = await say(gw, f"send_message_to_agent {json.dumps({'jobId': job_id, 'message': STEER})}")
        health = await say(gw, f"get_background_job_health {json.dumps({'jobId': job_id})}")
        posted = await _wait(
            lambda: fetch_row(
                db, "SELECT text FROM messages WHERE role = 'system' AND text LIKE 'Background task%'"
            )
        )
        await _wait(
            lambda: fetch_row(db, "SELECT 1 FROM messages WHERE role = 'assistant' AND text = 'noted'")
        )
        again = await say(gw, f"send_message_to_agent {json.dumps({'jobId': job_id, 'message': 'more'})}")
        cancel = await say(gw, f"cancel_background_job {json.dumps({'jobId': job_id, 'reason': 'late'})}")
        finished = await say(gw, f"get_background_job_health {json.dumps({'jobId': job_id})}")
    assert steer.text.startswith("OK ") and json.loads(steer.text[3:])["pendingSteering"] == 1
    snapshot = json.loads(health.text[3:])
    assert snapshot["state"] == "running" and snapshot["pendingSteering"] == 1
    assert [(p["message"], p["phase"]) for p in snapshot["progress"]] == [("scanning", "scan")]
    assert steered.is_set()
    assert posted["text"].endswith("done, steered")
    assert again.text.startswith("ERROR ") and "already completed" in again.text
    assert cancel.text.startswith("OK ") and "nothing to cancel" in cancel.text
    final = json.loads(finished.text[3:])
    assert final["state"] == "completed" and final["pendingSteering"] == 0
    assert final["lastOutputLines"] == ["done, steered"]
    # The background child held only its narrowed labels plus emit_progress.
    assert tool_names(of(fake.requests, "BG")[0]) == {
        "agent",
        "compose",
        "cancel_background_job",
        "get_background_job_health",
        "send_message_to_agent",
        "git_read",
        "emit_progress",
    }


async def test_canceling_a_running_background_child_records_the_reason_and_posts_the_cancellation(
    tmp_path: Path,
) -> None:
    def route(body: dict[str, Any]) -> Reply:
        if first_user(body).startswith("BG"):
            return Reply(text="too late", delay=5)
        return parent(body)

    fake = FakeAnthropic(responder=route)
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        db = gw.components.db
        job_id = json.loads((await say(gw, "start")).text[3:])["jobId"]
        await _wait(lambda: fetch_row(db, "SELECT 1 FROM background_tasks WHERE state = 'running'"))
        cancel = await say(
            gw, f"cancel_background_job {json.dumps({'jobId': job_id, 'reason': 'not needed'})}"
        )
        row = await fetch_row(
            db,
            "SELECT t.state, j.cancel_reason FROM background_tasks t JOIN child_jobs j ON j.id = t.id",
        )
        other = await say(gw, f"get_background_job_health {json.dumps({'jobId': 'someone-elses'})}")
        rows = await fetch_rows(db, "SELECT text FROM messages WHERE text LIKE '%too late%'")
    assert json.loads(cancel.text[3:]) == {"jobId": job_id, "state": "canceled", "reason": "not needed"}
    assert (row["state"], row["cancel_reason"]) == ("canceled", "not needed")
    assert other.text.startswith("ERROR ") and "no background job 'someone-elses'" in other.text
    assert rows == []
