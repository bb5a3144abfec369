"""Shared findings and procedures: entries are reached only through their tree's root run, a
tree holds a bounded number, subscriptions deliver other runs' matching entries once, old rows
are swept; procedures are drafts until approved, and a rewrite is a draft again."""

from __future__ import annotations

import pytest

from gateway.store.findings import FindingsFullError, NewFinding
from tests.unit.store.contract.conftest import Backend


def _entry(root: int, run: int, subject: str, content: str, kind: str = "finding") -> NewFinding:
    return NewFinding(root, run, "p", kind, subject, content, ("a.py:1",), 0.5, (), None)


async def test_entries_belong_to_their_root_run_and_are_bounded(store: Backend) -> None:
    first = await store.write(
        store.findings.publish, _entry(1, 1, "Auth", "token expiry"), now=10.0, max_entries=2
    )
    await store.write(
        store.findings.publish, _entry(1, 2, "db", "postgres chosen", "decision"), now=11.0, max_entries=2
    )
    await store.write(store.findings.publish, _entry(2, 3, "Auth", "other tree"), now=12.0, max_entries=2)
    with pytest.raises(FindingsFullError):
        await store.write(store.findings.publish, _entry(1, 1, "x", "y"), now=13.0, max_entries=2)
    mine = await store.read(store.findings.query_findings, 1, ["AUTH"])
    assert [(r.id, r.content, r.evidence, r.confidence) for r in mine] == [
        (first, "token expiry", ("a.py:1",), 0.5)
    ]
    assert [r.content for r in await store.read(store.findings.query_findings, 1, [])] == [
        "postgres chosen",
        "token expiry",
    ]
    assert [r.content for r in await store.read(store.findings.query_findings, 1, [], type="decision")] == [
        "postgres chosen"
    ]
    assert await store.read(store.findings.query_findings, 1, ["100%"]) == []
    assert [r.id for r in await store.read(store.findings.get_findings, 2, [first])] == []
    assert [r.content for r in await store.read(store.findings.recent_findings, 1, 1)] == ["postgres chosen"]


async def test_a_subscription_shows_other_runs_matching_entries_once(store: Backend) -> None:
    await store.write(store.findings.publish, _entry(1, 1, "auth", "before"), now=1.0, max_entries=50)
    sub = await store.write(store.findings.subscribe, 1, 5, subject="AUTH", type=None, now=2.0)
    await store.write(store.findings.publish, _entry(1, 5, "auth", "own"), now=3.0, max_entries=50)
    await store.write(
        store.findings.publish, _entry(1, 6, "Auth refresh", "sibling"), now=4.0, max_entries=50
    )
    await store.write(store.findings.publish, _entry(1, 6, "deploy", "off topic"), now=5.0, max_entries=50)
    await store.write(store.findings.publish, _entry(2, 7, "auth", "other tree"), now=6.0, max_entries=50)
    got = await store.write(store.findings.deliveries, 5, limit=10)
    assert [(s, r.content) for s, r in got] == [(sub, "sibling")]
    assert await store.write(store.findings.deliveries, 5, limit=10) == []


async def test_old_entries_and_subscriptions_are_swept(store: Backend) -> None:
    await store.write(store.findings.publish, _entry(1, 1, "a", "old"), now=1.0, max_entries=50)
    await store.write(store.findings.subscribe, 1, 2, subject=None, type=None, now=1.0)
    await store.write(store.findings.publish, _entry(1, 1, "a", "new"), now=1.0 + 86400 * 2, max_entries=50)
    assert [r.content for r in await store.read(store.findings.query_findings, 1, [])] == ["new"]
    assert await store.write(store.findings.deliveries, 2, limit=10) == []


async def test_a_procedure_is_a_draft_until_approved_and_a_rewrite_needs_approval_again(
    store: Backend,
) -> None:
    row = await store.write(
        store.procedures.write_procedure, "p", "deploy", description="d", content="v1", now=1.0
    )
    assert (row.status, row.approved_at) == ("draft", None)
    assert (
        await store.write(
            store.procedures.approve_procedure, "p", "nope", content="x", description="d", now=2.0
        )
        is None
    )
    approved = await store.write(
        store.procedures.approve_procedure, "p", "deploy", content="v1 edited", description="d", now=2.0
    )
    assert approved is not None and (approved.status, approved.content) == ("approved", "v1 edited")
    assert [r.name for r in await store.read(store.procedures.list_procedures, "p", status="approved")] == [
        "deploy"
    ]
    again = await store.write(
        store.procedures.write_procedure, "p", "deploy", description="d", content="v2", now=3.0
    )
    assert (again.status, again.content, again.id) == ("draft", "v2", row.id)
    assert await store.read(store.procedures.list_procedures, "q") == []
    assert await store.read(store.procedures.count_procedures, "p") == 1
