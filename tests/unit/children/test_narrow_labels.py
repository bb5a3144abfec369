"""narrow_labels: a child holds only what both its parent and its allowlist grant."""

from __future__ import annotations

from gateway.labels import narrow_labels


def test_a_label_the_parent_lacks_is_never_granted() -> None:
    assert narrow_labels(["git.read"], ["git.read", "memory.access:persona", "agent.dispatch"]) == (
        "git.read",
    )


def test_fixed_scopes_take_the_narrower_word() -> None:
    assert narrow_labels(
        ["fs.read:persona", "memory.access:thread"], ["fs.read:thread", "memory.access:persona"]
    ) == (
        "fs.read:thread",
        "memory.access:thread",
    )


def test_named_scopes_meet_at_the_name() -> None:
    assert narrow_labels(["channel.send:*"], ["channel.send:team"]) == ("channel.send:team",)
    assert narrow_labels(["channel.send:team"], ["channel.send:*"]) == ("channel.send:team",)
    assert narrow_labels(["channel.send:team"], ["channel.send:ops"]) == ()


def test_invalid_labels_grant_nothing() -> None:
    assert narrow_labels(["fs.read:everything", "git.read"], ["fs.read:persona", "git.read:x"]) == ()
