"""The workspace labels: their grammar, what each scope opens, and that one function decides."""

from __future__ import annotations

from gateway.labels import check, example_label, granted_scopes, label_problem, may_list
from tools.workspace import read_file, write_file


def test_workspace_labels_and_their_scopes_are_valid() -> None:
    for label in (
        "fs.read:thread",
        "fs.read:persona",
        "fs.write:thread",
        "fs.write:persona",
        "shell.exec:sandbox",
        "git.read",
    ):
        assert label_problem(label) is None, label


def test_wrong_scopes_say_which_scopes_exist() -> None:
    problem = label_problem("fs.read:all")
    assert problem is not None and "one of the scopes thread, persona" in problem
    assert "fs.read:thread|persona" in problem
    problem = label_problem("fs.read")
    assert problem is not None and "needs a scope" in problem
    problem = label_problem("shell.exec:host")
    assert problem is not None and "only takes the scope 'sandbox'" in problem
    problem = label_problem("git.read:repo")
    assert problem is not None and "takes no scope" in problem


def test_granted_scopes_reads_only_valid_labels_of_the_prefix() -> None:
    labels = ["fs.read:thread", "fs.read:persona", "fs.read:bogus", "fs.write:thread"]
    assert granted_scopes(labels, "fs.read") == {"thread", "persona"}
    assert granted_scopes(labels, "fs.write") == {"thread"}
    assert granted_scopes([], "fs.read") == frozenset()


def test_read_and_write_labels_list_their_own_tools_only() -> None:
    assert may_list(["fs.read:thread"], read_file.TOOL)
    assert not may_list(["fs.read:persona"], write_file.TOOL)
    assert not may_list(["fs.write:persona"], read_file.TOOL)
    refused = check(["db.query:own"], read_file.TOOL, {"file_path": "a"})
    assert not refused.allowed and "fs.read:thread|persona" in refused.reason


def test_example_label_is_the_widest_valid_label() -> None:
    assert example_label("fs.read") == "fs.read:persona"
    assert example_label("shell.exec") == "shell.exec:sandbox"
    assert example_label("git.read") == "git.read"
    assert example_label("channel.send") == "channel.send:*"
