"""Which memory a turn may reach: the scopes its ``memory.access`` labels open, and whose
memory each scope means for that turn.

``memory.access:thread`` opens the thread's memory; ``:user`` that and the memory of the
sender the turn answers (across the persona's threads on that channel); ``:persona`` those
and the persona's own, shared by everyone who talks to it. The user scope exists only in a
turn that answers one sender: a turn of several senders, a schedule's or an ad-hoc
``talon mcp host-tools`` session has no user memory, so one member's private facts can
never reach another's turn.

Both the memory tools and the system prompt's hot memory (:func:`hot_memory_section`) ask
:func:`memory_keys`, so what a turn is shown and what its tools may touch never differ.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from gateway.labels import MEMORY_SCOPES, granted_scopes
from gateway.store.facts import SCOPES, Scope, ScopeKey, hot_blocks, user_owner

__all__ = ["HOT_HEADING", "allowed_scopes", "hot_memory_section", "memory_keys"]

PREFIX = "memory.access"
HOT_HEADING = "## Memory you keep (hot memory)"
_HOT_TITLES = {
    "persona": "For everyone",
    "user": "About the person you are answering",
    "thread": "This conversation",
}


def allowed_scopes(labels: Iterable[str]) -> tuple[Scope, ...]:
    """The scopes the ``memory.access`` labels among ``labels`` open, narrowest first."""
    opened = {s for g in granted_scopes(labels, PREFIX) for s in MEMORY_SCOPES.get(g, ())}
    return tuple(s for s in SCOPES if s in opened)


def memory_keys(
    labels: Iterable[str],
    *,
    persona: str,
    thread_id: int,
    channel: str,
    sender_id: str | None,
) -> dict[Scope, ScopeKey]:
    """Whose memory each open scope means for this turn; no ``user`` key without one sender."""
    keys: dict[Scope, ScopeKey] = {}
    for scope in allowed_scopes(labels):
        if scope == "thread":
            keys[scope] = ScopeKey("thread", persona, str(thread_id))
        elif scope == "user" and sender_id is not None:
            keys[scope] = ScopeKey("user", persona, user_owner(channel, sender_id))
        elif scope == "persona":
            keys[scope] = ScopeKey("persona", persona, "")
    return keys


def hot_memory_section(conn: sqlite3.Connection, keys: Sequence[ScopeKey]) -> str | None:
    """The system prompt's hot memory section for ``keys``, widest scope first; ``None`` when
    none of them holds any (database thread)."""
    rows = hot_blocks(conn, sorted(keys, key=lambda k: -SCOPES.index(k.scope)))
    if not rows:
        return None
    blocks = [f"### {_HOT_TITLES[row.scope]}\n{row.content}" for row in rows]
    return HOT_HEADING + "\n" + "\n\n".join(blocks)
