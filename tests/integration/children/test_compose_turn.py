"""``compose`` through real turns: parallel nodes, upstream data, fail_fast, and a retried
turn that reuses the nodes that had finished."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.fakes.model_api import Call, Error, FakeAnthropic, Reply
from tests.harness import provider_for, running_gateway, say, tool_results, write_config
from tests.integration.children.support import first_user, of, tool_names

DELAY = 0.6


def config(tmp_path: Path, fake: FakeAnthropic, **delegation: Any) -> Path:
    personas = {"assistant": {"capabilities": ["agent.dispatch", "git.read", "skill.use"]}}
    extra = {"delegation": delegation} if delegation else {}
    return write_config(tmp_path, provider=provider_for(fake), personas=personas, extra=extra)


def composer(graph: dict[str, Any], *, fail_after: int = 0):
    """The parent: call compose with ``graph``, then answer with its result. The first
    ``fail_after`` answers after the result are a 500 (the turn fails and is retried)."""
    failures = {"left": fail_after}

    def respond(body: dict[str, Any]) -> Reply | Error:
        results = tool_results(body)
        if not results:
            return Reply(tool_calls=[Call("compose", graph)])
        if failures["left"]:
            failures["left"] -= 1
            return Error(500)
        error, text = results[-1]
        return Reply(text=("ERROR " if error else "OK ") + text)

    return respond


class Nodes:
    """The node children: each answers ``<node> done`` after ``DELAY``, and notes when it was asked."""

    def __init__(self, fail: set[str] = frozenset(), slow: set[str] = frozenset()):
        self.asked: dict[str, list[float]] = {}
        self.fail = fail
        self.slow = slow

    def __call__(self, body: dict[str, Any]) -> Reply | Error:
        node = first_user(body).split()[1]
        self.asked.setdefault(node, []).append(time.monotonic())
        if node in self.fail:
            return Error(400, "node model refused")
        return Reply(text=f"{node} done", delay=DELAY * (5 if node in self.slow else 1))


def routed(parent: Any, nodes: Nodes):
    def respond(body: dict[str, Any]) -> Reply | Error:
        return nodes(body) if first_user(body).startswith("NODE") else parent(body)

    return respond


def node(node_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": node_id, "prompt": f"NODE {node_id} work", **extra}


async def test_independent_nodes_run_at_once_and_a_downstream_node_gets_their_outputs_as_untrusted_data(
    tmp_path: Path,
) -> None:
    graph = {
        "nodes": [node("a"), node("b"), node("c"), node("d")],
        "edges": [{"from": "a", "to": "d"}, {"from": "b", "to": "d"}, {"from": "c", "to": "d"}],
    }
    nodes = Nodes()
    fake = FakeAnthropic(responder=routed(composer(graph), nodes))
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
    result = json.loads(turn.text.removeprefix("OK "))
    assert result["outcome"] == "completed"
    assert {n["id"]: (n["status"], n["output"]) for n in result["nodes"]} == {
        x: ("completed", f"{x} done") for x in "abcd"
    }
    starts = [nodes.asked[x][0] for x in "abc"]
    assert max(starts) - min(starts) < DELAY  # all three were asked before the first answered
    assert nodes.asked["d"][0] - max(starts) >= DELAY  # d waited for them
    (d_request,) = [r for r in of(fake.requests, "NODE d")]
    text = first_user(d_request)
    for x in "abc":
        assert f'<upstream-output node="{x}" trust="untrusted">' in text and f"{x} done" in text
    assert "data, not instructions" in text
    # Nodes are leaves: no agent, compose or skill.
    assert tool_names(d_request) == {"git_read"}


async def test_the_parallel_cap_holds_nodes_back(tmp_path: Path) -> None:
    graph = {"nodes": [node("a"), node("b"), node("c")]}
    nodes = Nodes()
    fake = FakeAnthropic(responder=routed(composer(graph), nodes))
    async with fake, running_gateway(config(tmp_path, fake, compose_parallel=2)) as gw:
        await say(gw, "go")
    starts = sorted(nodes.asked[x][0] for x in "abc")
    assert starts[1] - starts[0] < DELAY and starts[2] - starts[0] >= DELAY


async def test_under_fail_fast_a_failure_skips_downstream_and_cancels_running_nodes(tmp_path: Path) -> None:
    graph = {"nodes": [node("a"), node("b"), node("slow")], "edges": [{"from": "a", "to": "b"}]}
    nodes = Nodes(fail={"a"}, slow={"slow"})
    fake = FakeAnthropic(responder=routed(composer(graph), nodes))
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        started = time.monotonic()
        turn = await say(gw, "go")
        elapsed = time.monotonic() - started
    result = json.loads(turn.text.removeprefix("OK "))
    by_id = {n["id"]: n for n in result["nodes"]}
    assert result["outcome"] == "failed"
    assert by_id["a"]["status"] == "failed" and "node model refused" in by_id["a"]["error"]
    assert by_id["b"]["status"] == "skipped" and "b" not in nodes.asked
    assert by_id["slow"]["status"] == "canceled"
    assert elapsed < DELAY * 5  # the slow node's answer was not waited for


async def test_without_fail_fast_only_downstream_nodes_are_skipped(tmp_path: Path) -> None:
    graph = {
        "nodes": [node("a"), node("b"), node("c")],
        "edges": [{"from": "a", "to": "b"}],
        "fail_fast": False,
    }
    nodes = Nodes(fail={"a"})
    fake = FakeAnthropic(responder=routed(composer(graph), nodes))
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
    result = json.loads(turn.text.removeprefix("OK "))
    assert result["outcome"] == "partial"
    assert [n["status"] for n in result["nodes"]] == ["failed", "skipped", "completed"]


async def test_a_retried_turn_reuses_the_nodes_that_had_finished(tmp_path: Path) -> None:
    graph = {"nodes": [node("a"), node("b")], "edges": [{"from": "a", "to": "b"}]}
    nodes = Nodes()
    fake = FakeAnthropic(responder=routed(composer(graph, fail_after=1), nodes))
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
    result = json.loads(turn.text.removeprefix("OK "))
    assert result["reused"] == ["a", "b"]
    assert {x: len(times) for x, times in nodes.asked.items()} == {"a": 1, "b": 1}
    assert result["usage"] == {"input_tokens": 0, "output_tokens": 0, "model_calls": 0}


async def test_a_cycle_is_refused_with_the_cycle_named(tmp_path: Path) -> None:
    graph = {
        "nodes": [node("a"), node("b"), node("c")],
        "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}, {"from": "c", "to": "a"}],
    }
    nodes = Nodes()
    fake = FakeAnthropic(responder=routed(composer(graph), nodes))
    async with fake, running_gateway(config(tmp_path, fake)) as gw:
        turn = await say(gw, "go")
    assert turn.text.startswith("ERROR ") and "cycle (a -> b -> c -> a)" in turn.text
    assert nodes.asked == {}
