"""Capability labels: grammar, listing, scope enforcement, and the registry built on them."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from gateway.labels import KNOWN_LABELS, check, label_problem, may_list
from tools.base import HostTool
from tools.host import db_query, net_http


async def _noop(ctx: Any, args: dict[str, Any]) -> None:
    return None


def _tool(mcp_name: str, prefix: str, scope_arg: str | None = None) -> HostTool:
    return HostTool(
        mcp_name=mcp_name,
        internal_name=mcp_name.replace("_", "."),
        prefix=prefix,
        description="",
        input_schema={"type": "object"},
        handler=_noop,
        scope_arg=scope_arg,
    )


CHANNEL_SEND = _tool("channel_send", "channel.send", "channelId")
PERSONA_SEND = _tool("persona_send", "persona.send", "target_persona")
PERSONA_LIST = _tool("persona_list", "persona.send")
SUBAGENT = _tool("subagent_invoke", "subagent.invoke")


@pytest.mark.parametrize(
    "label",
    [
        "channel.send:*",
        "channel.send:team-slack",
        "channel.send:ops_2",
        "memory.access:thread",
        "net.http:egress",
        "db.query:own",
        "schedule.manage:own",
        "subagent.invoke",
        "subagent.background",
        "persona.send:*",
        "persona.send:researcher",
    ],
)
def test_valid_labels_have_no_problem(label: str) -> None:
    assert label_problem(label) is None


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        (
            "chanel.send:*",
            ["unknown capability label 'chanel.send:*'", "did you mean 'channel.send", "known:"],
        ),
        ("DB.query:own", ["unknown capability label", "did you mean 'db.query:own'"]),
        ("filesystem.write", ["unknown capability label 'filesystem.write'", "net.http:egress"]),
        ("channel.send", ["needs a scope", "channel.send:<channel>|*"]),
        ("persona.send:", ["needs a scope", "persona.send:<persona>|*"]),
        ("memory.access:all", ["only takes one of the scopes thread, user, persona", "memory.access:thread"]),
        ("db.query:*", ["only takes the scope 'own'"]),
        ("subagent.invoke:fast", ["takes no scope", "write 'subagent.invoke'"]),
        ("channel.send:Team Slack", ["must be '*' or a lower-case name"]),
        ("persona.send:a:b", ["must be '*' or a lower-case name"]),
        ("", ["unknown capability label ''"]),
    ],
)
def test_invalid_labels_name_the_label_and_the_fix(label: str, expected: list[str]) -> None:
    problem = label_problem(label)
    assert problem is not None
    for part in expected:
        assert part in problem


def test_non_string_label_is_reported() -> None:
    problem = label_problem(5)
    assert problem is not None and "must be a string" in problem


def test_known_list_in_messages_covers_every_prefix() -> None:
    problem = label_problem("nope.nope")
    assert problem is not None
    for prefix in KNOWN_LABELS:
        assert prefix in problem


def test_tool_is_listed_only_with_a_label_of_its_prefix() -> None:
    assert may_list(["db.query:own"], db_query.TOOL)
    assert not may_list(["db.query:own"], net_http.TOOL)
    assert may_list(["db.query:own", "net.http:egress"], net_http.TOOL)
    assert not may_list([], db_query.TOOL)


def test_invalid_labels_grant_nothing() -> None:
    assert not may_list(["channel.send"], CHANNEL_SEND)
    assert not may_list(["db.query:all"], db_query.TOOL)
    assert not may_list(["DB.QUERY:own"], db_query.TOOL)
    assert not check(["net.http"], net_http.TOOL, {}).allowed


def test_refusal_without_the_label_says_which_label_is_needed() -> None:
    decision = check(["db.query:own"], net_http.TOOL, {"method": "GET", "url": "https://example.com"})
    assert not decision.allowed
    assert "net.http:egress" in decision.reason


def test_named_channel_scope_allows_only_that_channel() -> None:
    labels = ["channel.send:team-slack"]
    assert check(labels, CHANNEL_SEND, {"channelId": "team-slack", "content": "hi"}).allowed
    refused = check(labels, CHANNEL_SEND, {"channelId": "team-discord", "content": "hi"})
    assert not refused.allowed
    assert "'team-discord'" in refused.reason and "'team-slack'" in refused.reason


def test_several_named_scopes_combine() -> None:
    labels = ["channel.send:team-slack", "channel.send:console"]
    assert check(labels, CHANNEL_SEND, {"channelId": "console"}).allowed
    assert check(labels, CHANNEL_SEND, {"channelId": "team-slack"}).allowed
    assert not check(labels, CHANNEL_SEND, {"channelId": "team-telegram"}).allowed


def test_star_scope_allows_any_value() -> None:
    assert check(["channel.send:*"], CHANNEL_SEND, {"channelId": "anything-at-all"}).allowed
    assert check(["persona.send:*"], PERSONA_SEND, {"target_persona": "researcher"}).allowed


def test_scope_compares_exact_values() -> None:
    labels = ["channel.send:team-slack"]
    assert not check(labels, CHANNEL_SEND, {"channelId": "TEAM-SLACK"}).allowed
    assert not check(labels, CHANNEL_SEND, {"channelId": "team-slack "}).allowed


@pytest.mark.parametrize("value", [None, "", 7, ["team-slack"]])
def test_missing_or_malformed_scope_argument_is_refused(value: Any) -> None:
    args = {} if value is None else {"channelId": value}
    decision = check(["channel.send:team-slack"], CHANNEL_SEND, args)
    assert not decision.allowed
    assert "channelId" in decision.reason


def test_persona_scope_limits_targets_but_not_tools_without_a_scope_argument() -> None:
    labels = ["persona.send:researcher"]
    assert check(labels, PERSONA_SEND, {"target_persona": "researcher", "message": "x"}).allowed
    assert not check(labels, PERSONA_SEND, {"target_persona": "writer", "message": "x"}).allowed
    assert may_list(labels, PERSONA_LIST)
    assert check(labels, PERSONA_LIST, {}).allowed


def test_listing_and_checking_agree() -> None:
    """For every label set, a tool is listed exactly when some call to it can be allowed."""
    pool = [
        "db.query:own",
        "net.http:egress",
        "channel.send:console",
        "persona.send:*",
        "subagent.invoke",
        "bogus",
    ]
    tools_and_args = [
        (db_query.TOOL, {}),
        (net_http.TOOL, {}),
        (CHANNEL_SEND, {"channelId": "console"}),
        (PERSONA_SEND, {"target_persona": "anyone"}),
        (PERSONA_LIST, {}),
        (SUBAGENT, {}),
    ]
    for n in range(len(pool) + 1):
        for labels in itertools.combinations(pool, n):
            for tool, args in tools_and_args:
                assert may_list(labels, tool) == check(labels, tool, args).allowed, (labels, tool.mcp_name)


# ---------------------------------------------------------------- registry


def test_registry_lists_each_host_tool_once_under_both_names() -> None:
    from tools import host, registry

    tools = registry.all_tools()
    # The ten host tools of the reference, each once, are the host family.
    assert [t for t in tools if t in host.TOOLS] == list(host.TOOLS)
    assert sorted(t.mcp_name for t in host.TOOLS) == sorted(
        [
            "schedule_manage",
            "channel_send",
            "memory_access",
            "net_http",
            "db_query",
            "subagent_invoke",
            "background_agent",
            "persona_send",
            "persona_task_status",
            "persona_list",
        ]
    )
    for tool in tools:
        assert registry.by_mcp_name(tool.mcp_name) is tool
        assert registry.by_internal_name(tool.internal_name) is tool
        assert tool.prefix in KNOWN_LABELS
    assert registry.by_mcp_name("db.query") is None
    assert registry.by_internal_name("db_query") is None
    assert registry.by_mcp_name("shell_exec") is None


def test_registry_offers_tools_by_label() -> None:
    from tools import registry

    names = [t.mcp_name for t in registry.tools_for(["db.query:own", "net.http:egress", "channel.send"])]
    assert names == ["db_query", "net_http", "web_request", "web_scrape"]
    assert registry.tools_for([]) == []
    every = registry.tools_for(
        [
            "channel.send:*",
            "memory.access:thread",
            "db.query:own",
            "net.http:egress",
            "schedule.manage:own",
            "subagent.invoke",
            "subagent.background",
            "persona.send:*",
            "fs.read:persona",
            "fs.write:persona",
            "shell.exec:sandbox",
            "git.read",
            "state.read:team",
            "state.write:team",
            "agent.dispatch",
            "agent.progress",
            "jobs.manage",
            "skill.use",
            "model.complete",
            "workspace.share",
            "runtime.inspect",
            "browser.use",
            "image.generate",
            "chat.ask",
        ]
    )
    assert every == registry.all_tools()
