"""The one path space: what each label opens, and every way out refused with the roots named."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tools.base import ToolContext, ToolError
from tools.workspace.roots import WorkspaceRoots, open_regular


def _read(roots: WorkspaceRoots, path: str) -> bytes:
    with roots.resolved(path) as resolved:
        fd, _ = open_regular(resolved)
    try:
        return os.read(fd, 1000)
    finally:
        os.close(fd)


def _refusal(roots: WorkspaceRoots, path: str) -> str:
    with pytest.raises(ToolError) as caught:
        _read(roots, path)
    return str(caught.value)


def test_roots_live_in_the_data_dir(ctx: ToolContext, tmp_path: Path) -> None:
    roots = WorkspaceRoots.for_call(ctx, "read")
    data = (tmp_path / "data").resolve()
    assert [(r.name, r.host) for r in roots.roots] == [
        ("/workspace", data / "workspaces" / "assistant" / "threads" / "1"),
        ("/shared", data / "workspaces" / "assistant" / "shared"),
    ]


def test_thread_scope_opens_only_the_thread_workspace(make_ctx: Callable[..., ToolContext]) -> None:
    roots = WorkspaceRoots.for_call(make_ctx(labels=("fs.read:thread",)), "read")
    assert [r.name for r in roots.roots] == ["/workspace"]
    message = _refusal(roots, "/shared/a.txt")
    assert "labels do not open" in message and "/workspace" in message


def test_read_label_opens_nothing_for_writing(make_ctx: Callable[..., ToolContext]) -> None:
    roots = WorkspaceRoots.for_call(make_ctx(labels=("fs.read:persona",)), "write")
    assert roots.roots == ()
    with pytest.raises(ToolError, match=r"no fs\.read or fs\.write label"):
        roots.resolve("/workspace/a.txt")


def test_relative_and_absolute_paths_name_the_same_file(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "a.txt").write_text("hello")
    roots = WorkspaceRoots.for_call(ctx, "read")
    assert _read(roots, "sub/a.txt") == _read(roots, "/workspace/sub/a.txt") == b"hello"
    assert _read(roots, "/workspace/sub/../sub/./a.txt") == b"hello"


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "/proc/self/root/etc/passwd", "/proc/self/environ", "~/.ssh/id_rsa", "/root/.ssh/id_rsa"],
)
def test_paths_outside_the_roots_are_refused_naming_them(ctx: ToolContext, path: str) -> None:
    message = _refusal(WorkspaceRoots.for_call(ctx, "read"), path)
    assert "/workspace (this thread's files) and /shared" in message
    assert "send a path under /workspace" in message


def test_host_path_of_the_workspace_is_refused(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("x")
    assert "outside the workspace" in _refusal(WorkspaceRoots.for_call(ctx, "read"), str(workspace / "a.txt"))


def test_dot_dot_cannot_climb_to_the_database(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "data" / "talon.db").write_bytes(b"SQLite format 3\x00")
    roots = WorkspaceRoots.for_call(ctx, "read")
    for path in ("../../../../talon.db", "/workspace/../../../../talon.db", "/shared/../../../talon.db"):
        assert "climbs above" in _refusal(roots, path)


def test_dot_dot_cannot_reach_another_thread(make_ctx: Callable[..., ToolContext]) -> None:
    other = WorkspaceRoots.for_call(make_ctx(thread_id=2), "write")
    with other.resolved("secret.txt", create_parents=True) as resolved:
        os.close(resolved.open(os.O_WRONLY | os.O_CREAT))
    mine = WorkspaceRoots.for_call(make_ctx(thread_id=1), "read")
    assert "climbs above" in _refusal(mine, "../2/secret.txt")


def test_symlink_out_is_refused(ctx: ToolContext, workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "data" / "talon.db").write_bytes(b"secret")
    os.symlink(tmp_path / "data" / "talon.db", workspace / "db")
    os.symlink("../../../../talon.db", workspace / "db-relative")
    os.symlink("/proc/self/root/etc/passwd", workspace / "proc")
    os.symlink("/etc", workspace / "etc")
    roots = WorkspaceRoots.for_call(ctx, "read")
    assert "pointing outside" in _refusal(roots, "db")
    assert "climbs above" in _refusal(roots, "db-relative")
    assert "pointing outside" in _refusal(roots, "proc")
    assert "pointing outside" in _refusal(roots, "etc/passwd")


def test_symlinks_inside_the_roots_are_followed(ctx: ToolContext, workspace: Path, shared: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "real" / "a.txt").write_text("inside")
    (shared / "s.txt").write_text("shared")
    os.symlink("real", workspace / "alias")
    os.symlink("/workspace/real/a.txt", workspace / "sandbox-made")  # a link made inside the shell
    os.symlink("/shared/s.txt", workspace / "to-shared")
    roots = WorkspaceRoots.for_call(ctx, "read")
    assert _read(roots, "alias/a.txt") == b"inside"
    assert _read(roots, "sandbox-made") == b"inside"
    assert _read(roots, "to-shared") == b"shared"
    with roots.resolved("alias/a.txt") as resolved:
        assert resolved.virtual == "/workspace/real/a.txt"


def test_link_into_a_root_the_labels_do_not_open_is_refused(
    make_ctx: Callable[..., ToolContext], workspace: Path, shared: Path
) -> None:
    (shared / "s.txt").write_text("shared")
    os.symlink("/shared/s.txt", workspace / "to-shared")
    roots = WorkspaceRoots.for_call(make_ctx(labels=("fs.read:thread",)), "read")
    assert "pointing outside" in _refusal(roots, "to-shared")


def test_link_loops_end(ctx: ToolContext, workspace: Path) -> None:
    os.symlink("b", workspace / "a")
    os.symlink("a", workspace / "b")
    assert "more than 40 symbolic links" in _refusal(WorkspaceRoots.for_call(ctx, "read"), "a")


def test_hard_link_is_refused(ctx: ToolContext, workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "data" / "talon.db"
    outside.write_bytes(b"secret")
    os.link(outside, workspace / "db")
    message = _refusal(WorkspaceRoots.for_call(ctx, "read"), "db")
    assert "2 hard links" in message and "secret" not in message


def test_fifo_is_refused_without_hanging(ctx: ToolContext, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    assert "FIFO" in _refusal(WorkspaceRoots.for_call(ctx, "read"), "pipe")


def test_device_file_is_refused(ctx: ToolContext, workspace: Path) -> None:
    try:
        os.mknod(workspace / "null", 0o600 | 0o020000, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD")
    assert "device file" in _refusal(WorkspaceRoots.for_call(ctx, "read"), "null")


def test_missing_parent_is_reported_or_created(ctx: ToolContext, workspace: Path) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        WorkspaceRoots.for_call(ctx, "read").resolve("no/such/file.txt")
    with WorkspaceRoots.for_call(ctx, "write").resolved("new/deep/file.txt", create_parents=True) as item:
        assert not item.exists and item.virtual == "/workspace/new/deep/file.txt"
    assert (workspace / "new" / "deep").is_dir()


def test_read_only_shared_refuses_writes(make_ctx: Callable[..., ToolContext], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("repo")
    ctx = make_ctx(shared_path=repo, shared_read_only=True)
    assert _read(WorkspaceRoots.for_call(ctx, "read"), "/shared/README") == b"repo"
    with pytest.raises(ToolError, match="read-only for this persona"):
        WorkspaceRoots.for_call(ctx, "write").resolve("/shared/README")


def test_directory_swapped_for_a_link_during_the_walk_does_not_escape(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    """The parent is held open: replacing it by a link to the outside after the check changes
    nothing about what the open reaches."""
    (workspace / "d").mkdir()
    (workspace / "d" / "a.txt").write_text("inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.txt").write_text("OUTSIDE")
    roots = WorkspaceRoots.for_call(ctx, "read")
    with roots.resolved("d/a.txt") as resolved:
        os.rename(workspace / "d", workspace / "moved")
        os.symlink(tmp_path / "outside", workspace / "d")
        fd, _ = open_regular(resolved)
        try:
            assert os.read(fd, 100) == b"inside"
        finally:
            os.close(fd)


def test_bad_path_values_are_explained(ctx: ToolContext) -> None:
    roots = WorkspaceRoots.for_call(ctx, "read")
    for value in ("", "   ", "a\x00b", 5, "x" * 5000):
        with pytest.raises(ToolError):
            roots.resolve(value)
