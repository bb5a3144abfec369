"""git_read: allowlisted read-only queries on a repository in the workspace, in the sandbox."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.sandbox import sandbox_problem
from tools.base import ToolContext, ToolError
from tools.workspace.git_read import TOOL, git_argv

pytestmark = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")

LABELS = ("git.read", "fs.read:persona")


def _git(repo: Path, *args: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "a@x",
           "GIT_COMMITTER_NAME": "Ann", "GIT_COMMITTER_EMAIL": "a@x"}  # fmt: skip
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


@pytest.fixture
def repo_ctx(make_ctx: Callable[..., ToolContext], tmp_path: Path) -> tuple[ToolContext, Path]:
    ctx = make_ctx(labels=LABELS)
    repo = tmp_path / "data" / "workspaces" / "assistant" / "threads" / "1" / "proj"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("alpha\nbeta\n")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-q", "-m", "first commit")
    (repo / "a.txt").write_text("alpha\ngamma\n")
    return ctx, repo


async def call(ctx: ToolContext, **args: Any) -> dict[str, Any]:
    return await TOOL.handler(ctx, {"repo": "/workspace/proj", **args})


async def test_queries_answer(repo_ctx: tuple[ToolContext, Path]) -> None:
    ctx, _ = repo_ctx
    log = await call(ctx, subcommand="log", args=["--oneline", "--max-count=5"])
    assert "first commit" in log["output"]
    diff = await call(ctx, subcommand="diff", paths=["a.txt"])
    assert "-beta" in diff["output"] and "+gamma" in diff["output"]
    found = await call(ctx, subcommand="grep", pattern="alph", args=["-n"])
    assert "a.txt:1:alpha" in found["output"]
    status = await call(ctx, subcommand="status", args=["--short"])
    assert "M a.txt" in status["output"]


async def test_writing_and_executing_options_are_refused(repo_ctx: tuple[ToolContext, Path]) -> None:
    ctx, _ = repo_ctx
    for bad in (["--output=/workspace/x"], ["-c", "core.pager=sh"], ["--ext-diff"], ["--textconv"],
                ["--exec=sh"], ["--format=%G?"], ["-O"]):  # fmt: skip
        with pytest.raises(ToolError):
            await call(ctx, subcommand="log" if bad[0] != "-O" else "grep", args=bad, pattern=None)
    with pytest.raises(ToolError, match="not available"):
        await call(ctx, subcommand="push")
    with pytest.raises(ToolError, match="pattern is required for grep"):
        await call(ctx, subcommand="grep")
    with pytest.raises(ToolError, match="climbs above /workspace"):
        await call(ctx, subcommand="log", paths=["../../../../../../etc/passwd"])
    with pytest.raises(ToolError, match="outside the repository"):
        await call(ctx, subcommand="log", paths=["/shared"])
    with pytest.raises(ToolError, match="not a revision"):
        await call(ctx, subcommand="log", args=["main; rm -rf /"])


async def test_a_repository_config_cannot_run_programs_on_the_host(
    repo_ctx: tuple[ToolContext, Path],
) -> None:
    ctx, repo = repo_ctx
    marker = repo.parent / "pwned"
    (repo / ".gitattributes").write_text("*.txt filter=evil\n")
    with (repo / ".git" / "config").open("a") as fh:
        fh.write(f'[filter "evil"]\n\tclean = touch {marker}\n[core]\n\tfsmonitor = touch {marker}\n')
    (repo / "a.txt").write_text("changed again\n")
    await call(ctx, subcommand="status")
    await call(ctx, subcommand="diff")
    assert not marker.exists()


async def test_output_is_capped(repo_ctx: tuple[ToolContext, Path]) -> None:
    ctx, repo = repo_ctx
    (repo / "a.txt").write_text("x\n" * 50_000)
    result = await call(ctx, subcommand="diff", max_bytes=1000)
    assert result["truncated"] is True and len(result["output"]) <= 1000


def test_the_argv_has_no_pager_and_no_external_programs() -> None:
    argv = git_argv("/usr/bin/git", "diff", ["--stat"], ["a.txt"], None)
    assert argv[:2] == ["/usr/bin/git", "--no-pager"]
    assert "core.pager=cat" in argv and "diff.external=" in argv
    assert {"--no-ext-diff", "--no-textconv"} <= set(argv)
    assert argv[-2:] == ["--", "a.txt"]
