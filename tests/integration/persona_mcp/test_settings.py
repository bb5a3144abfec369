"""``mcp_servers`` entries: what is accepted, and the messages for what is not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gateway.persona_mcp import (
    HttpServerSettings,
    PersonaMcpManager,
    StdioServerSettings,
    doctor_findings,
    parse_mcp_servers,
)
from gateway.persona_mcp.settings import tool_name_problem
from gateway.personas import Persona

WHERE = "personas/alice/persona.yaml: mcp_servers"


def test_stdio_and_http_entries_with_defaults() -> None:
    servers, problems = parse_mcp_servers(
        "alice",
        {
            "files": {"command": "files-server", "args": ["--port", 8080], "env": {"DEBUG": True, "N": 3}},
            "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
        },
    )
    assert problems == []
    files, search = servers["files"], servers["search"]
    assert isinstance(files, StdioServerSettings) and isinstance(search, HttpServerSettings)
    assert (files.sandbox, files.network, files.timeout) == ("bwrap", False, 60.0)
    assert files.args == ["--port", "8080"] and files.env == {"DEBUG": "true", "N": "3"}
    assert search.headers == {"Authorization": "Bearer x"}


def test_reserved_names_are_refused() -> None:
    servers, problems = parse_mcp_servers("alice", {"__talond_host_tools": {"command": "x"}})
    assert servers == {}
    assert problems == [
        f"{WHERE}.__talond_host_tools: names starting with __talond_ are reserved for Talon's own servers; rename it"
    ]


def test_names_that_cannot_be_namespaced_are_refused() -> None:
    _, problems = parse_mcp_servers(
        "alice", {"my__files": {"command": "x"}, "with space": {"command": "x"}, "x" * 40: {"command": "x"}}
    )
    assert problems[0] == (
        f"{WHERE}.my__files: must not contain '__' (it separates server and tool names); rename it"
    )
    assert problems[1].startswith(f"{WHERE}.with space: must be 1-32 letters, digits, '_' or '-'")
    assert problems[2].startswith(f"{WHERE}.{'x' * 40}: must be 1-32 letters")


def test_each_bad_key_is_named() -> None:
    _, problems = parse_mcp_servers(
        "alice",
        {
            "files": {"command": "x", "sandbox": "docker", "timeout": 0, "comand_args": []},
            "both": {"command": "x", "url": "http://h/mcp"},
            "neither": {"args": []},
            "remote": {"url": "ftp://h/mcp"},
            "env": {"command": "x", "env": {"1BAD": "v"}},
            "typed": {"type": "http", "command": "x"},
            "paths": {"command": "x", "read_only_paths": ["relative/dir"]},
        },
    )
    assert f"{WHERE}.files.sandbox: Input should be 'bwrap' or 'none'" in problems
    assert f"{WHERE}.files.timeout: Input should be greater than 0" in problems
    assert (
        f"{WHERE}.files.comand_args: unknown key for a stdio server; remove it or check its spelling"
        in problems
    )
    needs_one = "needs exactly one of command (a stdio server) or url (a streamable HTTP server)"
    assert f"{WHERE}.both: {needs_one}" in problems
    assert f"{WHERE}.neither: {needs_one}" in problems
    assert any(p.startswith(f"{WHERE}.remote.url: String should match pattern") for p in problems)
    assert f"{WHERE}.env.env: '1BAD' is not a valid environment variable name" in problems
    assert any(p.startswith(f"{WHERE}.typed.type: 'http' does not match the entry") for p in problems)
    assert f"{WHERE}.paths.read_only_paths: 'relative/dir' must be an absolute path" in problems
    assert len(problems) == 9


async def test_manager_reports_bad_entries_and_keeps_the_good_ones(
    make_persona: Callable[..., Persona], make_manager: Callable[..., PersonaMcpManager]
) -> None:
    persona = make_persona({"__talond_x": {"command": "x"}, "ok": {"command": "x"}})
    manager = make_manager(persona)
    assert [c.name for c in manager.connections()] == ["ok"]
    assert manager.problems == [
        f"{WHERE}.__talond_x: names starting with __talond_ are reserved for Talon's own servers; rename it"
    ]
    assert not manager.owns(persona, "__talond_x__anything")


def test_tool_names_that_a_model_cannot_take_are_named() -> None:
    assert tool_name_problem("echo", "read_file") is None
    assert (
        tool_name_problem("echo", "read.file") == "'echo__read.file' must be 1-64 letters, digits, '_' or '-'"
    )
    assert tool_name_problem("echo", "x" * 60) is not None


def test_doctor_reports_unsandboxed_servers_and_a_missing_bubblewrap(
    tmp_path: Path, make_persona: Callable[..., Persona]
) -> None:
    persona = make_persona({"jail": {"command": "x"}, "open": {"command": "x", "sandbox": "none"}})
    missing = str(tmp_path / "no-bwrap")
    assert doctor_findings([persona], bwrap=missing) == [
        ("warn", "MCP server alice/open runs without a sandbox (sandbox: none)"),
        (
            "fail",
            f"bubblewrap ({missing}) is not installed; install it or set sandbox: none for the servers "
            "that use it (sandboxed: alice/jail)",
        ),
    ]
    unsandboxed = make_persona({"open": {"command": "x", "sandbox": "none"}}, name="bob")
    assert [level for level, _ in doctor_findings([unsandboxed], bwrap=missing)] == ["warn"]
