"""read_file, write_file, edit_file and patch_apply: happy paths, limits and refusals."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from tools.base import ToolContext, ToolError
from tools.workspace import edit_file, patch_apply, read_file, write_file
from tools.workspace.roots import WorkspaceRoots


async def call(tool: Any, ctx: ToolContext, **args: Any) -> Any:
    return await tool.TOOL.handler(ctx, args)


async def test_read_file_numbers_lines_and_pages(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 2501)))
    first = await call(read_file, ctx, file_path="/workspace/a.txt")
    lines = first.splitlines()
    assert lines[0] == "     1\tline 1" and lines[1999] == "  2000\tline 2000"
    assert "more follow: send offset=2001" in lines[-1]
    rest = await call(read_file, ctx, file_path="a.txt", offset=2001)
    assert rest.splitlines()[0] == "  2001\tline 2001"
    assert "end of file, 2500 lines; sha256:" in rest.splitlines()[-1]
    two = await call(read_file, ctx, file_path="a.txt", offset=10, limit=2)
    assert two.splitlines()[:2] == ["    10\tline 10", "    11\tline 11"]


async def test_read_file_reports_the_hash_edit_file_accepts(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("hello\n")
    text = await call(read_file, ctx, file_path="a.txt")
    digest = "sha256:" + hashlib.sha256(b"hello\n").hexdigest()
    assert digest in text
    result = await call(
        edit_file, ctx, file_path="a.txt", old_string="hello", new_string="bye", expected_hash=digest
    )
    assert result["replacements"] == 1


async def test_read_file_refuses_binary_with_a_pointer(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "doc.pdf").write_bytes(b"%PDF-1.4\x00\x01binary")
    (workspace / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(ToolError, match="use extract_document"):
        await call(read_file, ctx, file_path="doc.pdf")
    with pytest.raises(ToolError, match="use view_image"):
        await call(read_file, ctx, file_path="pic.png")


def _long_line_file(path: Path) -> None:
    with path.open("wb") as out:
        out.write(b"short\n")
        for _ in range(64):  # 64 MB on one line
            out.write(b"x" * (1 << 20))
        out.write(b"\nafter\n")


async def test_read_file_cuts_a_huge_line_without_holding_it(ctx: ToolContext, workspace: Path) -> None:
    _long_line_file(workspace / "long.txt")
    text = await call(read_file, ctx, file_path="long.txt")
    lines = text.splitlines()
    assert lines[0] == "     1\tshort"
    assert "line cut at 2000 characters" in lines[1] and len(lines[1]) < 2200
    assert lines[2] == "     3\tafter"


async def test_read_file_output_is_bounded(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "wide.txt").write_text(("y" * 1900 + "\n") * 2000)
    text = await call(read_file, ctx, file_path="wide.txt")
    assert len(text) < 260_000 and "output limit" in text


async def test_read_file_past_the_end_and_missing(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\ntwo\n")
    assert "offset 9 is past the end" in await call(read_file, ctx, file_path="a.txt", offset=9)
    with pytest.raises(ToolError, match="does not exist; list_directory or glob"):
        await call(read_file, ctx, file_path="nope.txt")


async def test_write_file_creates_parents_and_returns_the_hash(ctx: ToolContext, workspace: Path) -> None:
    result = await call(write_file, ctx, file_path="/workspace/out/report.csv", content="a,b\n1,2\n")
    assert result == {
        "file_path": "/workspace/out/report.csv",
        "bytes": 8,
        "created": True,
        "after_hash": "sha256:" + hashlib.sha256(b"a,b\n1,2\n").hexdigest(),
    }
    assert (workspace / "out" / "report.csv").read_text() == "a,b\n1,2\n"
    again = await call(write_file, ctx, file_path="out/report.csv", content="x")
    assert again["created"] is False and (workspace / "out" / "report.csv").read_text() == "x"
    assert [p.name for p in (workspace / "out").iterdir()] == ["report.csv"]  # no temp file left


async def test_write_file_replaces_a_hard_link_without_touching_the_other_name(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "data" / "talon.db"
    outside.write_bytes(b"database")
    os.link(outside, workspace / "db")
    await call(write_file, ctx, file_path="db", content="mine")
    assert outside.read_bytes() == b"database" and (workspace / "db").read_text() == "mine"


async def test_write_file_refuses_escapes(ctx: ToolContext, tmp_path: Path, workspace: Path) -> None:
    os.symlink(tmp_path / "data", workspace / "data-link")
    for path in ("/etc/talon-test", "../../../../x", "data-link/talon.db", "/proc/self/root/tmp/x"):
        with pytest.raises(ToolError, match="this call may use /workspace"):
            await call(write_file, ctx, file_path=path, content="x")
    assert not (tmp_path / "data" / "talon.db").exists()


async def test_edit_file_exact_once_or_replace_all(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.py").write_text("x = 1\ny = 1\nx = 1\n")
    with pytest.raises(ToolError, match=r"matches 2 places .*\(lines 1, 3\)"):
        await call(edit_file, ctx, file_path="a.py", old_string="x = 1", new_string="x = 2")
    with pytest.raises(ToolError, match="was not found"):
        await call(edit_file, ctx, file_path="a.py", old_string="z = 1", new_string="z = 2")
    result = await call(edit_file, ctx, file_path="a.py", old_string="y = 1", new_string="y = 2")
    assert result["replacements"] == 1
    result = await call(
        edit_file, ctx, file_path="a.py", old_string="x = 1", new_string="x = 3", replace_all=True
    )
    assert result["replacements"] == 2
    assert (workspace / "a.py").read_text() == "x = 3\ny = 2\nx = 3\n"


async def test_edit_file_checks_expected_hash(ctx: ToolContext, workspace: Path) -> None:
    written = await call(write_file, ctx, file_path="a.txt", content="v1")
    (workspace / "a.txt").write_text("someone else")
    with pytest.raises(ToolError, match="changed since"):
        await call(
            edit_file,
            ctx,
            file_path="a.txt",
            old_string="else",
            new_string="x",
            expected_hash=written["after_hash"],
        )
    with pytest.raises(ToolError, match="do not compute or guess"):
        await call(edit_file, ctx, file_path="a.txt", old_string="else", new_string="x", expected_hash="abc")
    assert (workspace / "a.txt").read_text() == "someone else"


async def test_patch_apply_validates_every_file_before_writing(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    result = await call(
        patch_apply,
        ctx,
        changes=[
            {"path": "a.txt", "edits": [{"old": "alpha", "new": "ALPHA"}]},
            {"path": "b.txt", "edits": [{"old": "missing", "new": "x"}]},
            {"path": "/etc/passwd", "content": "x"},
        ],
    )
    assert result["status"] == "rejected" and result["note"] == "nothing was written"
    assert [e["path"] for e in result["errors"]] == ["b.txt", "/etc/passwd"]
    assert (workspace / "a.txt").read_text() == "alpha\n"


async def test_patch_apply_dry_run_then_apply(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    changes = [
        {"path": "a.txt", "edits": [{"old": "alpha", "new": "ALPHA"}]},
        {"path": "new/b.txt", "content": "beta\n"},
    ]
    dry = await call(patch_apply, ctx, changes=changes, dry_run=True)
    assert dry["status"] == "dry_run"
    assert "-alpha\n+ALPHA\n" in dry["diff"] and "+++ /workspace/new/b.txt" in dry["diff"]
    assert not (workspace / "new").exists()
    done = await call(patch_apply, ctx, changes=changes)
    assert done["status"] == "applied" and "_reread_warning" in done
    assert (workspace / "a.txt").read_text() == "ALPHA\n" and (
        workspace / "new" / "b.txt"
    ).read_text() == "beta\n"
    stale = await call(
        patch_apply,
        ctx,
        changes=[{"path": "a.txt", "content": "x", "expected_hash": dry["files"][0]["before_hash"]}],
    )
    assert stale["status"] == "rejected" and "changed since" in stale["errors"][0]["error"]


async def test_patch_apply_partial_failure_restores_earlier_files(
    ctx: ToolContext, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "a.txt").write_text("one\n")
    (workspace / "b.txt").write_text("two\n")
    real = patch_apply.write_atomic
    calls = {"n": 0}

    def failing(resolved: Any, data: bytes, **kw: Any) -> str:
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        return real(resolved, data, **kw)

    monkeypatch.setattr(patch_apply, "write_atomic", failing)
    result = await call(
        patch_apply,
        ctx,
        changes=[{"path": "a.txt", "content": "ONE\n"}, {"path": "b.txt", "content": "TWO\n"}],
    )
    assert result["status"] == "partial_failure"
    assert result["failed"] == {"path": "/workspace/b.txt", "error": "No space left on device"}
    assert result["restored"] == ["/workspace/a.txt"]
    assert (workspace / "a.txt").read_text() == "one\n" and (workspace / "b.txt").read_text() == "two\n"


async def test_patch_apply_needs_edits_or_content(ctx: ToolContext, workspace: Path) -> None:
    result = await call(patch_apply, ctx, changes=[{"path": "a.txt", "content": None}])
    assert result["status"] == "rejected" and "no change supplied" in result["errors"][0]["error"]


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"one line without newline",
        b"a\nb\nc\n",
        b"crlf\r\nlines\r\nhere",
        b"text\n" * 4998 + b"bad \xff\xfe utf-8\ncut \xe2\x82\nend\n",  # past the binary sniff
        b"short\n" + b"x" * 9000 + b"\nafter\n",
        b"\n\n\n",
        b"".join(b"%d: %s\n" % (i, b"w" * (i % 300)) for i in range(5000)),
    ],
)
def test_read_file_reads_small_files_whole_with_the_same_text(
    ctx: ToolContext, workspace: Path, monkeypatch: pytest.MonkeyPatch, content: bytes
) -> None:
    (workspace / "f.txt").write_bytes(content)
    roots = WorkspaceRoots.for_call(ctx, "read")
    pages = [(1, 2000), (2, 1), (3, 2), (4999, 5), (4000, 2000), (6000, 10)]
    whole = [read_file.read_text(roots, "f.txt", o, n) for o, n in pages]
    monkeypatch.setattr(read_file, "READ_WHOLE_UP_TO", -1)
    assert [read_file.read_text(roots, "f.txt", o, n) for o, n in pages] == whole
