"""glob, grep, list_directory and json_query: results, bounds and refusals."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tools.base import ToolContext, ToolError
from tools.workspace import glob, grep, json_query, list_directory
from tools.workspace.globbing import expand_braces
from tools.workspace.grep import ripgrep_path


async def call(tool: Any, ctx: ToolContext, **args: Any) -> Any:
    return await tool.TOOL.handler(ctx, args)


def _tree(root: Path) -> None:
    for rel in ("src/a.py", "src/b.ts", "src/deep/c.py", ".git/config", "node_modules/x/i.py", "README.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"content of {rel}\nTODO: fix {rel}\n")


async def test_glob_matches_recursively_and_skips_vcs_folders(ctx: ToolContext, workspace: Path) -> None:
    _tree(workspace)
    result = await call(glob, ctx, pattern="**/*.py")
    assert result["matches"] == ["/workspace/src/a.py", "/workspace/src/deep/c.py"]
    named = await call(glob, ctx, pattern="node_modules/**/*.py")
    assert named["matches"] == ["/workspace/node_modules/x/i.py"]
    assert (await call(glob, ctx, pattern="src/*.{py,ts}"))["matches"] == [
        "/workspace/src/a.py",
        "/workspace/src/b.ts",
    ]
    assert (await call(glob, ctx, pattern="/workspace/src/**/c.py"))["matches"] == [
        "/workspace/src/deep/c.py"
    ]


async def test_glob_stops_at_500(ctx: ToolContext, workspace: Path) -> None:
    for i in range(600):
        (workspace / f"f{i:03d}.txt").write_text("")
    result = await call(glob, ctx, pattern="*.txt")
    assert result["count"] == 500 and result["truncated"] is True and "narrow" in result["note"]


async def test_glob_does_not_follow_links_out(ctx: ToolContext, workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.py").write_text("")
    os.symlink(tmp_path / "outside", workspace / "out")
    assert (await call(glob, ctx, pattern="**/*.py"))["matches"] == []


def test_brace_expansion_is_bounded_and_ranges_are_literal() -> None:
    assert expand_braces("a{b,c{d,e}}f") == ["abf", "acdf", "acef"]
    assert expand_braces("{1..3}") == ["{1..3}"]
    assert expand_braces("{a") == ["{a"]
    assert expand_braces("{single}") == ["{single}"]
    with pytest.raises(ToolError, match="more than 255 alternatives"):
        expand_braces("{a,b,c,d}" * 5)


needs_rg = pytest.mark.skipif(ripgrep_path() is None, reason="ripgrep is not installed")


@needs_rg
async def test_grep_reports_file_line_content_and_honours_gitignore(
    ctx: ToolContext, workspace: Path
) -> None:
    _tree(workspace)
    (workspace / ".gitignore").write_text("ignored.txt\n")
    (workspace / "ignored.txt").write_text("TODO hidden\n")
    (workspace / ".env").write_text("TODO dotfile\n")
    out = await call(grep, ctx, pattern="TODO")
    lines = sorted(out.splitlines())
    assert "/workspace/src/a.py:2:TODO: fix src/a.py" in lines
    assert "/workspace/.env:1:TODO dotfile" in lines
    assert not any(".git/" in line or "ignored.txt" in line for line in lines)
    only_ts = await call(grep, ctx, pattern="TODO", include="*.ts", path="/workspace/src")
    assert only_ts.splitlines() == ["/workspace/src/b.ts:2:TODO: fix src/b.ts"]


@needs_rg
async def test_grep_output_is_head_and_tail(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "many.txt").write_text("".join(f"match {i} {'x' * 80}\n" for i in range(5000)))
    out = await call(grep, ctx, pattern="match")
    assert len(out) < 55_000
    assert "match 0 " in out and "match 4999 " in out
    assert "lines omitted" in out and "narrow pattern, include or path" in out


@needs_rg
async def test_grep_skips_hard_links_and_bad_regex_is_explained(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "data" / "talon.db"
    outside.write_text("TOKEN=secret\n")
    os.link(outside, workspace / "db")
    out = await call(grep, ctx, pattern="TOKEN")
    assert "secret" not in out
    with pytest.raises(ToolError, match="escape regex metacharacters"):
        await call(grep, ctx, pattern="(unclosed")
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(grep, ctx, pattern="root", path="/etc")


async def test_list_directory_marks_types(ctx: ToolContext, workspace: Path) -> None:
    _tree(workspace)
    os.symlink("README.md", workspace / "link")
    out = await call(list_directory, ctx, path="/workspace")
    lines = out.splitlines()
    assert lines[0] == "/workspace/ (5 entries)"
    assert "src/" in lines and "link@ -> README.md" in lines
    assert any(line.startswith("README.md (") for line in lines)
    with pytest.raises(ToolError, match="outside the workspace"):
        await call(list_directory, ctx, path="/proc/self/root")


def _doc(workspace: Path, value: Any) -> None:
    (workspace / "data.json").write_text(json.dumps(value))


async def test_json_query_subset(ctx: ToolContext, workspace: Path) -> None:
    _doc(workspace, {"name": "x", "items": [{"id": i, "tags": ["a"]} for i in range(5)], "my-key": 1})

    async def q(query: str, **kw: Any) -> dict[str, Any]:
        return await call(json_query, ctx, path="data.json", query=query, **kw)

    assert (await q(".name"))["result"] == "x"
    assert (await q(".items[0].id"))["result"] == 0
    assert (await q(".items | .[-1] | .id"))["result"] == 4
    assert (await q(".items[1:3] | length"))["result"] == 2
    ids = await q(".items[] | .id")
    assert ids["result"] == [0, 1, 2, 3, 4] and ids["type"] == "stream" and ids["truncated"] is False
    assert (await q("keys"))["result"] == ["items", "my-key", "name"]
    assert (await q('."my-key"'))["result"] == 1
    assert (await q(".missing"))["result"] is None
    whole = await q(".")
    assert whole["type"] == "object" and whole["source_size"] == (workspace / "data.json").stat().st_size


async def test_json_query_bounds_results_and_bytes(ctx: ToolContext, workspace: Path) -> None:
    _doc(workspace, list(range(10_000)))
    few = await call(json_query, ctx, path="data.json", query=".[]", max_results=3)
    assert few["result"] == [0, 1, 2] and few["truncated"] is True
    small = await call(json_query, ctx, path="data.json", query=".", max_bytes=100)
    assert len(json.dumps(small["result"])) <= 100 and small["truncated"] is True


async def test_json_query_refuses_unsupported_and_deep_input(ctx: ToolContext, workspace: Path) -> None:
    _doc(workspace, {"a": 1})
    with pytest.raises(ToolError, match="jq subset"):
        await call(json_query, ctx, path="data.json", query=".a | select(. > 1)")
    with pytest.raises(ToolError, match="cannot read field"):
        await call(json_query, ctx, path="data.json", query=".a.b")
    (workspace / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ToolError, match="nested deeper"):
        await call(json_query, ctx, path="deep.json", query=".")
    (workspace / "bad.json").write_text("{not json")
    with pytest.raises(ToolError, match="not usable JSON"):
        await call(json_query, ctx, path="bad.json", query=".")
