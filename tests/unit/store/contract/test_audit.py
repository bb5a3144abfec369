"""audit: rows are stored as recorded, in order, and read back newest first."""

from __future__ import annotations

from dataclasses import replace

from gateway.store.audit import AuditRow
from tests.unit.store.contract.conftest import Backend


def _row(ts: float, decision: str, **fields: object) -> AuditRow:
    base = AuditRow(ts, None, None, None, "memory_access", decision, None, None)
    return replace(base, **fields)  # type: ignore[arg-type]


async def test_rows_come_back_newest_first_with_what_was_recorded(store: Backend) -> None:
    first = _row(1.0, "allowed", run_id=7, thread_id=3, persona="p", detail="args: key")
    second = _row(2.0, "result", run_id=7, thread_id=3, persona="p", status="ok")
    await store.write(store.audit.add_entries, [first, second])
    await store.write(store.audit.add_entries, [_row(3.0, "refused", tool=None, detail="no run")])
    newest = await store.read(store.audit.recent_entries, 10)
    assert [replace(r, id=None) for r in newest] == [
        _row(3.0, "refused", tool=None, detail="no run"),
        second,
        first,
    ]
    ids = [r.id for r in newest]
    assert all(isinstance(i, int) for i in ids) and ids == sorted(ids, reverse=True)


async def test_the_limit_keeps_the_newest_and_is_at_least_one(store: Backend) -> None:
    await store.write(store.audit.add_entries, [_row(float(i), "allowed") for i in range(5)])
    assert [r.ts for r in await store.read(store.audit.recent_entries, 2)] == [4.0, 3.0]
    assert [r.ts for r in await store.read(store.audit.recent_entries, 0)] == [4.0]
    assert await store.write(store.audit.add_entries, []) is None
    assert len(await store.read(store.audit.recent_entries)) == 5
