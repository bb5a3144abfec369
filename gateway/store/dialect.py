"""Which engine a store connection talks to, for the few functions whose SQL differs."""

from __future__ import annotations

from typing import Any

__all__ = ["is_postgres"]


def is_postgres(conn: Any) -> bool:
    """True for a :class:`~gateway.store.pg_connection.PgConnection`, False for sqlite3's."""
    return getattr(conn, "dialect", "") == "postgresql"
