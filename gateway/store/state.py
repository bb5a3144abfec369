"""The ``state_documents`` table: versioned JSON documents by owner, namespace and key.

An owner is one persona's documents (:func:`persona_owner`) or the team's, shared by every
persona (:data:`TEAM`); every function takes the owner and never reaches another's
documents. A document's version starts at 1 and grows by one with each write, so a writer
can update it only at the version it read (:func:`cas_document`): one transaction reads
and writes, and two writers never both succeed at the same version.

A document past its ``expires_at`` is treated as absent by every function; each write also
deletes a few expired rows (:data:`PURGE_BATCH`), so they do not pile up. Each owner's
document count and bytes are kept in ``state_usage`` by the same transactions and bounded
by :class:`StateLimits`.

Values and metadata are JSON text, encoded and checked by the caller. Every function runs
on the database thread, inside ``Database.run_transaction`` or ``Database.read``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from gateway.errors import RefusedError

__all__ = [
    "PURGE_BATCH",
    "TEAM",
    "CasOutcome",
    "StateDocument",
    "StateLimits",
    "StateQuotaError",
    "Usage",
    "cas_document",
    "delete_document",
    "get_document",
    "persona_owner",
    "purge_expired",
    "put_document",
    "query_documents",
    "usage",
]

TEAM = "team"
PURGE_BATCH = 8  # expired rows each write deletes: enough to keep up, too few to slow the write
_QUOTA_PURGE = 1000  # expired rows of the owner deleted before a write is refused for its caps
_KEY_END = "{"  # sorts right after 'z', the last character a key may hold


def persona_owner(persona: str) -> str:
    """The owner of ``persona``'s own documents."""
    return f"persona/{persona}"


@dataclass(frozen=True, slots=True)
class StateLimits:
    """The most documents and bytes (values and metadata) one owner may hold."""

    max_documents: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class Usage:
    documents: int
    bytes: int


@dataclass(frozen=True, slots=True)
class StateDocument:
    """One live document (metadata left out: it is never read back)."""

    namespace: str
    key: str
    value: str
    version: int
    written_by: str
    updated_at: float
    expires_at: float | None


@dataclass(frozen=True, slots=True)
class CasOutcome:
    """What :func:`cas_document` did.

    Attributes:
        matched (:obj:`bool`): The document was at the expected version and was written.
        version (:obj:`int`): The version after the write when matched, else the current
            version (0: there is no document).
        current (:class:`StateDocument` | None): On a mismatch, the current document.
    """

    matched: bool
    version: int
    current: StateDocument | None = None


class StateQuotaError(RefusedError):
    """A write would take its owner past a cap of :class:`StateLimits`."""

    def __init__(self, cap: str, limit: int, usage: Usage):
        super().__init__(f"the owner's documents would pass the {cap} cap of {limit}")
        self.cap = cap
        self.limit = limit
        self.usage = usage


_COLUMNS = "namespace, key, value, version, written_by, updated_at, expires_at"


def _live(expires_at: float | None, now: float) -> bool:
    return expires_at is None or expires_at > now


def get_document(
    conn: sqlite3.Connection, owner: str, namespace: str, key: str, now: float
) -> StateDocument | None:
    """The document, or ``None`` when there is none or it has expired."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM state_documents WHERE owner = ? AND namespace = ? AND key = ?",
        (owner, namespace, key),
    ).fetchone()
    if row is None or not _live(row[6], now):
        return None
    return StateDocument(*row)


def usage(conn: sqlite3.Connection, owner: str) -> Usage:
    """The owner's documents and bytes, expired ones not yet purged included."""
    row = conn.execute("SELECT documents, bytes FROM state_usage WHERE owner = ?", (owner,)).fetchone()
    return Usage(0, 0) if row is None else Usage(*row)


def _count(conn: sqlite3.Connection, owner: str, documents: int, size: int) -> None:
    conn.execute(
        "INSERT INTO state_usage (owner, documents, bytes) VALUES (?, ?, ?) ON CONFLICT (owner) "
        "DO UPDATE SET documents = state_usage.documents + excluded.documents, "
        "bytes = state_usage.bytes + excluded.bytes",
        (owner, documents, size),
    )


def _delete_rows(conn: sqlite3.Connection, rows: list[tuple[int, str, int]]) -> int:
    """Delete ``(rowid, owner, size)`` rows and take them off their owners' usage."""
    if not rows:
        return 0
    conn.executemany("DELETE FROM state_documents WHERE rowid = ?", [(r[0],) for r in rows])
    freed: dict[str, list[int]] = {}
    for _, owner, size in rows:
        entry = freed.setdefault(owner, [0, 0])
        entry[0] += 1
        entry[1] += size
    for owner, (documents, size) in freed.items():
        _count(conn, owner, -documents, -size)
    return len(rows)


def purge_expired(conn: sqlite3.Connection, now: float, *, limit: int, owner: str | None = None) -> int:
    """Delete up to ``limit`` expired documents (of ``owner`` only, when given); how many."""
    if owner is None:
        rows = conn.execute(
            "SELECT rowid, owner, size FROM state_documents WHERE expires_at <= ? LIMIT ?", (now, limit)
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT rowid, owner, size FROM state_documents WHERE expires_at <= ? AND owner = ? LIMIT ?",
            (now, owner, limit),
        ).fetchall()
    return _delete_rows(conn, rows)


def _existing(
    conn: sqlite3.Connection, owner: str, namespace: str, key: str, now: float
) -> tuple[int, int] | None:
    """(version, size) of the live document; an expired one is deleted first and is ``None``."""
    row = conn.execute(
        "SELECT rowid, version, size, expires_at FROM state_documents "
        "WHERE owner = ? AND namespace = ? AND key = ?",
        (owner, namespace, key),
    ).fetchone()
    if row is None:
        return None
    if not _live(row[3], now):
        _delete_rows(conn, [(row[0], owner, row[2])])
        return None
    return row[1], row[2]


def _check_caps(
    conn: sqlite3.Connection, owner: str, limits: StateLimits, added: int, grown: int, now: float
) -> None:
    current = usage(conn, owner)
    if current.documents + added <= limits.max_documents and current.bytes + grown <= limits.max_bytes:
        return
    if purge_expired(conn, now, limit=_QUOTA_PURGE, owner=owner):
        current = usage(conn, owner)
    if current.documents + added > limits.max_documents:
        raise StateQuotaError("documents", limits.max_documents, current)
    if current.bytes + grown > limits.max_bytes:
        raise StateQuotaError("bytes", limits.max_bytes, current)


@dataclass(frozen=True, slots=True)
class _Write:
    value: str
    metadata: str | None
    written_by: str
    expires_at: float | None

    @property
    def size(self) -> int:
        return len(self.value.encode("utf-8")) + (len(self.metadata.encode("utf-8")) if self.metadata else 0)


def _store(
    conn: sqlite3.Connection,
    owner: str,
    namespace: str,
    key: str,
    write: _Write,
    existing: tuple[int, int] | None,
    limits: StateLimits,
    now: float,
) -> int:
    """Write the document over ``existing`` (its version and size, or ``None``); the new version."""
    size = write.size
    old_size = 0 if existing is None else existing[1]
    _check_caps(conn, owner, limits, 0 if existing else 1, size - old_size, now)
    if existing is None:
        conn.execute(
            "INSERT INTO state_documents (owner, namespace, key, value, metadata, version, size, "
            "written_by, created_at, updated_at, expires_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)",
            (
                owner,
                namespace,
                key,
                write.value,
                write.metadata,
                size,
                write.written_by,
                now,
                now,
                write.expires_at,
            ),
        )
        version = 1
    else:
        version = existing[0] + 1
        conn.execute(
            "UPDATE state_documents SET value = ?, metadata = ?, version = ?, size = ?, written_by = ?, "
            "updated_at = ?, expires_at = ? WHERE owner = ? AND namespace = ? AND key = ?",
            (
                write.value,
                write.metadata,
                version,
                size,
                write.written_by,
                now,
                write.expires_at,
                owner,
                namespace,
                key,
            ),
        )
    _count(conn, owner, 0 if existing else 1, size - old_size)
    purge_expired(conn, now, limit=PURGE_BATCH)
    return version


def put_document(
    conn: sqlite3.Connection,
    owner: str,
    namespace: str,
    key: str,
    value: str,
    *,
    written_by: str,
    now: float,
    limits: StateLimits,
    metadata: str | None = None,
    expires_at: float | None = None,
) -> int:
    """Create or replace the document (value, metadata and expiry alike); its new version.

    Raises:
        :class:`StateQuotaError`: The owner would pass a cap; nothing was written.
    """
    existing = _existing(conn, owner, namespace, key, now)
    return _store(
        conn, owner, namespace, key, _Write(value, metadata, written_by, expires_at), existing, limits, now
    )


def cas_document(
    conn: sqlite3.Connection,
    owner: str,
    namespace: str,
    key: str,
    expected_version: int,
    value: str,
    *,
    written_by: str,
    now: float,
    limits: StateLimits,
    metadata: str | None = None,
    expires_at: float | None = None,
) -> CasOutcome:
    """Write the document only if its version is ``expected_version`` (0: only if there is none).

    Raises:
        :class:`StateQuotaError`: The versions matched but the owner would pass a cap.
    """
    existing = _existing(conn, owner, namespace, key, now)
    current = 0 if existing is None else existing[0]
    if current != expected_version:
        document = None if existing is None else get_document(conn, owner, namespace, key, now)
        return CasOutcome(False, current, document)
    write = _Write(value, metadata, written_by, expires_at)
    return CasOutcome(True, _store(conn, owner, namespace, key, write, existing, limits, now))


def delete_document(conn: sqlite3.Connection, owner: str, namespace: str, key: str, now: float) -> bool:
    """Delete the document; ``False`` when there was none (an expired one is purged and is none)."""
    row = conn.execute(
        "SELECT rowid, size, expires_at FROM state_documents WHERE owner = ? AND namespace = ? AND key = ?",
        (owner, namespace, key),
    ).fetchone()
    if row is None:
        return False
    _delete_rows(conn, [(row[0], owner, row[1])])
    return _live(row[2], now)


def query_documents(
    conn: sqlite3.Connection,
    owner: str,
    namespace: str,
    *,
    now: float,
    limit: int,
    key_prefix: str = "",
    after: str | None = None,
) -> list[StateDocument]:
    """Up to ``limit`` live documents of the namespace in key order, whose key starts with
    ``key_prefix`` and sorts after ``after``.

    Keys hold only ``[A-Za-z0-9_.-]``, so the prefix is a range of the primary key.
    """
    low, low_op = (after, ">") if after is not None and after >= key_prefix else (key_prefix, ">=")
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM state_documents WHERE owner = ? AND namespace = ? "
        f"AND key {low_op} ? AND key < ? AND (expires_at IS NULL OR expires_at > ?) ORDER BY key LIMIT ?",
        (owner, namespace, low, key_prefix + _KEY_END, now, limit),
    ).fetchall()
    return [StateDocument(*row) for row in rows]
