"""The ``nodes`` table and the advisory locks of a PostgreSQL cluster (docs/scaling.md).

A node is alive while its writer connection holds the node's advisory lock (the server frees
it the moment that connection is gone: a killed process, a cut network once keepalives give
up) and its heartbeat is fresh. The heartbeat also renews the node's queue leases and outbox
claims. A node that is not alive is *reaped* by whichever node looks first: its row is
deleted, its leased queue items go back to pending (or are dead-lettered when their attempts
are used up), its runs are interrupted, and the threads whose rows it was sending are handed
to the outbox to settle.

Roles held by one node at a time (the Telegram poller of a bot, the scheduler) are advisory
locks of the same writer connection, taken with :func:`try_lock` and kept until it closes.

These functions run on the writer's thread: :func:`try_lock` outside a transaction, the
others inside ``Database.run_transaction``; :func:`list_nodes` also on the reader.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "NodeRow",
    "Reaped",
    "backend_pid",
    "beat",
    "leave",
    "list_nodes",
    "lock_key",
    "reap",
    "register_node",
    "try_lock",
]

# The advisory locks granted in this database, as the bigint keys they were taken with.
_HELD_KEYS = (
    "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks WHERE locktype = 'advisory' "
    "AND granted AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
_LIVE_NODE = "node_id IN (SELECT node_id FROM nodes)"


def lock_key(name: str) -> int:
    """The advisory lock key of ``name``: stable across nodes and versions, positive, 62 bits."""
    return int.from_bytes(hashlib.sha256(f"talon:{name}".encode()).digest()[:8], "big") >> 2


def backend_pid(conn: sqlite3.Connection) -> int:
    """The server process of this connection (notifications name the one that sent them)."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    return int(row[0])


def try_lock(conn: sqlite3.Connection, key: int) -> bool:
    """Take the session advisory lock ``key`` unless another connection holds it."""
    row = conn.execute("SELECT pg_try_advisory_lock(?)", (key,)).fetchone()
    return bool(row and row[0])


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One node of the cluster as ``talon status`` shows it."""

    node_id: str
    host: str
    pid: int
    version: str
    started_at: float
    heartbeat_at: float
    alive: bool


def register_node(
    conn: sqlite3.Connection, node_id: str, *, host: str, pid: int, version: str, key: int, now: float
) -> None:
    """This node joins (its lock ``key`` already held); its runs record it from now on."""
    conn.execute(
        "INSERT INTO nodes (node_id, host, pid, version, lock_key, started_at, heartbeat_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (node_id) DO UPDATE SET host = excluded.host, "
        "pid = excluded.pid, version = excluded.version, lock_key = excluded.lock_key, "
        "started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at",
        (node_id, host, pid, version, key, now, now),
    )
    # Read by the default of runs.node_id (migration 0027), for the rest of the session.
    conn.execute("SELECT set_config('talon.node', ?, false)", (node_id,))


def beat(conn: sqlite3.Connection, node_id: str, now: float, until: float) -> bool:
    """The node's heartbeat: its leases and claims are renewed until ``until``. False when
    its row is gone (another node found it silent and reaped it): it must stop at once."""
    if (
        conn.execute(
            "UPDATE nodes SET heartbeat_at = ? WHERE node_id = ? RETURNING node_id", (now, node_id)
        ).fetchone()
        is None
    ):
        return False
    conn.execute(
        "UPDATE queue_items SET lease_expires_at = ? WHERE status = 'leased' AND lease_node = ?",
        (until, node_id),
    )
    conn.execute("UPDATE outbox_claims SET expires_at = ? WHERE node_id = ?", (until, node_id))
    return True


def leave(conn: sqlite3.Connection, node_id: str) -> None:
    """A node that stopped in order leaves; what it still held is reaped like a lost node's."""
    conn.execute("DELETE FROM nodes WHERE node_id = ?", (node_id,))


def list_nodes(conn: sqlite3.Connection, now: float, stale_after: float) -> list[NodeRow]:
    """Every registered node, oldest first, with whether it is alive."""
    rows = conn.execute(
        f"SELECT node_id, host, pid, version, started_at, heartbeat_at, "
        f"(heartbeat_at >= ? AND lock_key IN ({_HELD_KEYS})) FROM nodes ORDER BY started_at, node_id",
        (now - stale_after,),
    ).fetchall()
    return [NodeRow(r[0], r[1], int(r[2]), r[3], float(r[4]), float(r[5]), bool(r[6])) for r in rows]


@dataclass(frozen=True, slots=True)
class Reaped:
    """What :func:`reap` took back from lost nodes."""

    nodes: tuple[str, ...]  # the nodes found lost
    released: int  # queue items pending again
    dead_lettered: int  # queue items whose attempts were used up
    outbox_threads: tuple[int, ...]  # threads whose rows a lost node held: settle, then drop_claims

    def __bool__(self) -> bool:
        return bool(self.nodes or self.released or self.dead_lettered or self.outbox_threads)


def reap(conn: sqlite3.Connection, max_attempts: int, now: float, stale_after: float) -> Reaped:
    """Take back the work of every node that is not alive (see the module docstring)."""
    lost = [
        row[0]
        for row in conn.execute(
            f"SELECT node_id FROM nodes WHERE heartbeat_at < ? OR lock_key NOT IN ({_HELD_KEYS}) ORDER BY node_id",
            (now - stale_after,),
        ).fetchall()
    ]
    if lost:
        conn.execute(f"DELETE FROM nodes WHERE node_id IN ({_marks(lost)})", tuple(lost))
    # A lease is lost with its node, or when its node stopped renewing it.
    orphaned = (
        "status = 'leased' AND (lease_node IS NULL OR NOT lease_node IN (SELECT node_id FROM nodes) "
        "OR lease_expires_at < ?)"
    )
    dead = conn.execute(
        "UPDATE queue_items SET status = 'dead', last_error = 'interrupted too many times', updated_at = ? "
        f"WHERE {orphaned} AND attempts >= ?",
        (now, now, max_attempts),
    ).rowcount
    released = conn.execute(
        "UPDATE queue_items SET status = 'pending', lease_expires_at = NULL, lease_node = NULL, updated_at = ? "
        f"WHERE {orphaned}",
        (now, now),
    ).rowcount
    conn.execute(
        "UPDATE runs SET status = 'interrupted', ended_at = ? WHERE status = 'running' "
        f"AND NOT (node_id IS NOT NULL AND {_LIVE_NODE})",
        (now,),
    )
    conn.execute(
        "UPDATE runs SET status = 'ended', ended_at = ? WHERE status = 'session' "
        f"AND NOT (node_id IS NOT NULL AND {_LIVE_NODE})",
        (now,),
    )
    threads = conn.execute(
        f"SELECT thread_id FROM outbox_claims WHERE NOT {_LIVE_NODE} ORDER BY thread_id"
    ).fetchall()
    return Reaped(tuple(lost), released, dead, tuple(row[0] for row in threads))


def _marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))
