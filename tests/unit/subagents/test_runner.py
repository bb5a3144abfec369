"""The runner through ``subagent_invoke``: permissions, model fallback, timeouts, output repair."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import RefusedError
from gateway.store.db import Database
from tests.fakes.model_api import Error, FakeAnthropic, FakeOpenAI, Reply
from tests.unit.subagents.support import (
    Env,
    add_thread,
    json_reply,
    make_persona,
    request_text,
    write_definition,
)
from tools.base import ToolContext
from tools.host.subagent_invoke import TOOL

SCHEMA = """
output_schema:
  type: object
  required: [answer, confidence]
  properties:
    answer: {type: string}
    confidence: {type: number, minimum: 0, maximum: 1}
"""


async def invoke(ctx: ToolContext, name: str, input: dict[str, Any] | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"name": name}
    if input is not None:
        args["input"] = input
    return await TOOL.handler(ctx, args)


def define(root: Path, name: str, model: str, *, extra: str = "", timeout: float = 30) -> None:
    write_definition(
        root,
        f"{name}.md",
        f"name: {name}\ndescription: Answers questions.\nmodel: {model}\ntimeout: {timeout}\n{extra}",
        "Answer the question in the input.",
    )


async def ctx_for(env: Env, db: Database, **persona: Any) -> ToolContext:
    return env.ctx(db, await add_thread(db), make_persona(env.root, **persona))


def test_tool_identity() -> None:
    assert (TOOL.mcp_name, TOOL.internal_name, TOOL.prefix, TOOL.scope_arg) == (
        "subagent_invoke",
        "subagent.invoke",
        "subagent.invoke",
        None,
    )
    assert TOOL.timeout > 600  # the sub-agent's own timeout (at most 600 s) ends a call first


async def test_a_valid_reply_comes_back_as_summary_data_and_usage(
    make: Callable[..., Env], anthropic: FakeAnthropic, db: Database, tmp_path: Path
) -> None:
    define(tmp_path, "oracle", "anthropic:claude-x", extra=SCHEMA)
    env = make({"anthropic": anthropic})
    ctx = await ctx_for(env, db, subagents=["oracle"])
    anthropic.script(json_reply({"answer": "42", "confidence": 0.9}, input_tokens=30, output_tokens=7))
    result = await invoke(ctx, "oracle", {"question": "meaning of life?"})
    assert result["data"] == {"answer": "42", "confidence": 0.9}
    assert result["usage"] == {
        "input_tokens": 30,
        "output_tokens": 7,
        "model_calls": 1,
        "model": "anthropic:claude-x",
    }
    [body] = anthropic.requests
    assert body["model"] == "claude-x"
    assert "meaning of life?" in request_text(body)
    assert body["system"].startswith("Answer the question in the input.")
    assert '"required": ["answer", "confidence"]' in body["system"]  # the schema is in the prompt


async def test_free_text_sub_agent_returns_text_as_summary(
    make: Callable[..., Env], anthropic: FakeAnthropic, db: Database, tmp_path: Path
) -> None:
    define(tmp_path, "poet", "anthropic:claude-x")
    ctx = await ctx_for(make({"anthropic": anthropic}), db, subagents=["poet"])
    anthropic.script(Reply(text="Roses are red."))
    result = await invoke(ctx, "poet", {"topic": "roses"})
    assert (result["summary"], result["data"]) == ("Roses are red.", None)


async def test_invalid_output_is_repaired_once(
    make: Callable[..., Env], anthropic: FakeAnthropic, db: Database, tmp_path: Path
) -> None:
    define(tmp_path, "oracle", "anthropic:claude-x", extra=SCHEMA)
    ctx = await ctx_for(make({"anthropic": anthropic}), db, subagents=["oracle"])
    anthropic.script(
        json_reply({"answer": "42", "confidence": "very"}),
        Reply(text='Sure! ```json\n{"answer": "42", "confidence": 0.8}\n```'),
    )
    result = await invoke(ctx, "oracle", {"question": "?"})
    assert result["data"] == {"answer": "42", "confidence": 0.8}
    assert result["usage"]["model_calls"] == 2
    repair = request_text(anthropic.requests[1])
    assert "at confidence: 'very' is not of type 'number'" in repair
    assert "corrected JSON object" in repair


async def test_output_still_invalid_after_the_repair_is_a_clear_error(
    make: Callable[..., Env], anthropic: FakeAnthropic, db: Database, tmp_path: Path
) -> None:
    define(tmp_path, "oracle", "anthropic:claude-x", extra=SCHEMA)
    ctx = await ctx_for(make({"anthropic": anthropic}), db, subagents=["oracle"])
    anthropic.script(Reply(text="I think it is 42."), json_reply({"answer": "42"}))
    with pytest.raises(RefusedError) as caught:
        await invoke(ctx, "oracle", {"question": "?"})
    message = str(caught.value)
    assert "'oracle' returned output that does not match its output_schema" in message
    assert "after one repair attempt" in message
    assert "'confidence' is a required property" in message
    assert len(anthropic.requests) == 2  # one repair, no more


@pytest.mark.parametrize("failure", [Error(500), Error(401, message="invalid x-api-key")])
async def test_a_failing_provider_falls_back_to_the_next_model(
    make: Callable[..., Env],
    anthropic: FakeAnthropic,
    openai: FakeOpenAI,
    db: Database,
    tmp_path: Path,
    failure: Error,
) -> None:
    define(tmp_path, "oracle", "[anthropic:claude-x, backup:gpt-y]", extra=SCHEMA)
    ctx = await ctx_for(make({"anthropic": anthropic, "backup": openai}), db, subagents=["oracle"])
    anthropic.script(failure)
    openai.script(json_reply({"answer": "from the backup", "confidence": 1}))
    result = await invoke(ctx, "oracle", {"question": "?"})
    assert result["data"]["answer"] == "from the backup"
    assert result["usage"]["model"] == "backup:gpt-y"
    assert len(anthropic.requests) == 1 and openai.requests[0]["model"] == "gpt-y"


async def test_every_model_failing_names_each_failure(
    make: Callable[..., Env], anthropic: FakeAnthropic, openai: FakeOpenAI, db: Database, tmp_path: Path
) -> None:
    define(tmp_path, "oracle", "[anthropic:claude-x, backup:gpt-y]")
    ctx = await ctx_for(make({"anthropic": anthropic, "backup": openai}), db, subagents=["oracle"])
    anthropic.script(Error(500))
    openai.script(Error(400, message="model gpt-y does not exist"))
    with pytest.raises(RefusedError) as caught:
        await invoke(ctx, "oracle", {})
    message = str(caught.value)
    assert "'oracle' failed on every model" in message
    assert "anthropic:claude-x: model provider 'anthropic': HTTP 500" in message
    assert "backup:gpt-y" in message and "model gpt-y does not exist" in message


async def test_a_timeout_is_final_no_fallback(
    make: Callable[..., Env], anthropic: FakeAnthropic, openai: FakeOpenAI, db: Database, tmp_path: Path
) -> None:
    define(tmp_path, "slow", "[anthropic:claude-x, backup:gpt-y]", timeout=0.3)
    env = make({"anthropic": anthropic, "backup": openai})
    await env.providers["anthropic"].warm_up()  # the SDK import is not what times out here
    ctx = await ctx_for(env, db, subagents=["slow"])
    anthropic.script(Reply(text="too late", delay=3))
    openai.script(Reply(text="would have answered"))
    with pytest.raises(
        RefusedError, match=r"'slow' did not finish within its timeout of 0\.3 s.*no fallback"
    ):
        await invoke(ctx, "slow", {})
    assert openai.requests == []


async def test_a_persona_not_listing_the_sub_agent_is_refused(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    ctx = await ctx_for(env, db, subagents=["memory-retriever"])
    with pytest.raises(RefusedError) as caught:
        await invoke(ctx, "session-summarizer", {})
    assert str(caught.value) == (
        "persona 'alice' may not invoke the sub-agent 'session-summarizer': it is not listed under "
        "subagents: in personas/alice/persona.yaml (listed: memory-retriever)"
    )
    assert anthropic.requests == []


async def test_a_persona_without_the_required_capability_is_refused(
    env: Env, anthropic: FakeAnthropic, db: Database
) -> None:
    ctx = await ctx_for(env, db, capabilities=["subagent.invoke"])
    with pytest.raises(
        RefusedError, match=r"needs the capability memory\.access:thread, which persona 'alice'"
    ):
        await invoke(ctx, "memory-groomer", {})
    assert anthropic.requests == []


async def test_an_unknown_name_lists_what_this_persona_may_invoke(env: Env, db: Database) -> None:
    ctx = await ctx_for(
        env, db, subagents=["memory-retriever", "spark-coder"], capabilities=["subagent.invoke"]
    )
    # memory-retriever needs memory.access:thread, which this persona lacks: not offered.
    with pytest.raises(
        RefusedError, match=r"^unknown sub-agent 'summarise'; this persona may invoke: spark-coder$"
    ):
        await invoke(ctx, "summarise", {})


async def test_a_default_on_an_unconfigured_provider_names_the_override_key(
    make: Callable[..., Env], openai: FakeOpenAI, db: Database
) -> None:
    env = make({"local": openai})
    ctx = await ctx_for(env, db)
    with pytest.raises(RefusedError) as caught:
        await invoke(ctx, "memory-retriever", {"query": "x"})
    message = str(caught.value)
    assert "'memory-retriever' is unavailable" in message
    assert "'anthropic:claude-haiku-4-5'" in message
    assert "set subagents.models.memory-retriever to '<provider>:<model>'" in message
    assert "(configured: local)" in message
    assert env.runner.unavailable("memory-retriever") == message


async def test_a_model_override_from_talon_yaml_is_used(
    make: Callable[..., Env], openai: FakeOpenAI, db: Database
) -> None:
    env = make({"local": openai}, models={"session-summarizer": "local:qwen2.5:7b"})
    ctx = await ctx_for(env, db)
    openai.script(json_reply({"summary": "Nothing happened.", "key_facts": [], "open_threads": []}))

    def write(conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO messages (thread_id, role, text, created_at) VALUES (?, 'user', 'hello there', 0)",
            (ctx.thread_id,),
        )

    await db.run_transaction(write)
    result = await invoke(ctx, "session-summarizer", {})
    assert result["summary"] == "Nothing happened."
    assert openai.requests[0]["model"] == "qwen2.5:7b"
    assert result["usage"]["model"] == "local:qwen2.5:7b"


async def test_bad_overrides_and_persona_lists_are_config_problems(
    make: Callable[..., Env], openai: FakeOpenAI, tmp_path: Path
) -> None:
    env = make(
        {"local": openai}, models={"memory-retreiver": "local:x", "spark-coder": ["nowhere:gpt", "bad"]}
    )
    problems = env.runner.config_problems(
        {"alice": make_persona(tmp_path, subagents=["file-searcher", "ghost"])}
    )
    assert problems[0].startswith("subagents.models.memory-retreiver: no sub-agent named 'memory-retreiver'")
    assert problems[1] == (
        "subagents.models.spark-coder: 'nowhere:gpt' uses the provider 'nowhere', which is not configured; "
        "use one of: local"
    )
    assert problems[2].startswith("subagents.models.spark-coder: 'bad' must be '<provider>:<model>'")
    assert problems[3].startswith("personas/alice/persona.yaml: subagents[1]: no sub-agent named 'ghost'")
    assert len(problems) == 4


async def test_input_must_be_an_object(env: Env, db: Database) -> None:
    ctx = await ctx_for(env, db)
    with pytest.raises(RefusedError, match="input for 'spark-coder' must be a JSON object"):
        await TOOL.handler(ctx, {"name": "spark-coder", "input": ["a"]})


async def test_without_a_runner_the_tool_says_so(env: Env, db: Database) -> None:
    ctx = await ctx_for(env, db)
    ctx.services = None
    with pytest.raises(RefusedError, match="sub-agents are not available in this context"):
        await invoke(ctx, "spark-coder", {"task": "x"})


def test_results_are_json_serializable() -> None:
    from gateway.subagents import SubagentResult

    assert json.loads(json.dumps(SubagentResult("s", {"a": 1}, {"model_calls": 0}).as_dict())) == {
        "summary": "s",
        "data": {"a": 1},
        "usage": {"model_calls": 0},
    }
