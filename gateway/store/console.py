"""The ``console_seen`` table: how far a console thread's chat windows have shown its output.

The console channel delivers to whatever window is open; one that is closed misses the
delivery. A window confirms what it printed (:func:`mark_seen`), and one that opens a thread
is first shown what was delivered after that (:func:`unseen_rows`), so a reply that arrived
while no window was open is not lost.

Every function runs on the database thread, inside ``Database.run_transaction`` or
``Database.read``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from connectors.base import ThreadKey
from gateway.store.outbox import DROP_PREVIEW
from gateway.store.threads import topic_value

__all__ = ["Unseen", "UnseenRow", "mark_seen", "unseen_rows"]


@dataclass(frozen=True, slots=True)
class UnseenRow:
    """One delivered chunk no window has confirmed: its outbox id and its text."""

    id: int
    text: str


@dataclass(frozen=True, slots=True)
class Unseen:
    """The newest unseen rows of a thread, oldest first, and how many older ones were left out."""

    rows: list[UnseenRow]
    left_out: int


_THREAD = "SELECT id FROM threads WHERE channel = ? AND chat_id = ? AND topic = ?"


def unseen_rows(conn: sqlite3.Connection, key: ThreadKey, limit: int) -> Unseen:
    """The thread's output after the last row a window confirmed (at most ``limit``, the newest).

    A thread without a ``console_seen`` row has had nothing confirmed yet: all its output is unseen.
    """
    params = (key.channel, key.chat_id, topic_value(key))
    where = (
        f"thread_id = ({_THREAD}) AND status IN ('pending', 'sending', 'sent') AND format != '{DROP_PREVIEW}' "
        "AND id > "
        f"COALESCE((SELECT outbox_id FROM console_seen WHERE thread_id = ({_THREAD})), 0)"
    )
    (total,) = conn.execute(f"SELECT COUNT(*) FROM outbox WHERE {where}", params * 2).fetchone()
    rows = conn.execute(
        f"SELECT id, text FROM outbox WHERE {where} ORDER BY id DESC LIMIT ?", (*params, *params, limit)
    ).fetchall()
    return Unseen([UnseenRow(int(r[0]), str(r[1])) for r in reversed(rows)], max(0, int(total) - len(rows)))


def mark_seen(conn: sqlite3.Connection, key: ThreadKey, upto: int) -> None:
    """A window printed the thread's output up to outbox row ``upto`` (never moves back)."""
    conn.execute(
        f"INSERT INTO console_seen (thread_id, outbox_id) SELECT ({_THREAD}), ? WHERE ({_THREAD}) IS NOT NULL "
        "ON CONFLICT (thread_id) DO UPDATE SET outbox_id = CASE WHEN excluded.outbox_id > console_seen.outbox_id "
        "THEN excluded.outbox_id ELSE console_seen.outbox_id END",
        (*(key.channel, key.chat_id, topic_value(key)), upto, key.channel, key.chat_id, topic_value(key)),
    )
