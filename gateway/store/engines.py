"""Opening the store on the engine the config names: the SQLite file in the data directory, or
a PostgreSQL database by URL."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from gateway.store.db import DB_FILE, Database, open_database

__all__ = ["open_store", "shown_location"]


async def open_store(
    url: str | None,
    data_path: Path,
    *,
    migrate: bool = True,
    node: bool = False,
    standby_poll: float | None = None,
    cluster: bool = False,
) -> Database:
    """The store at ``url`` (PostgreSQL) or, with none, ``talon.db`` in ``data_path``.

    ``node``: this is the daemon; on PostgreSQL it holds the database's node lock while open,
    waiting for it with ``standby_poll``, or sharing it as a ``cluster`` node
    (:func:`gateway.store.postgres.open_postgres`).

    Raises:
        SchemaTooNewError: the database is from a newer Talon.
        RefusedError: another node holds the database.
        sqlite3.Error: the database cannot be opened.
    """
    if url:
        from gateway.store.postgres import open_postgres  # psycopg is loaded only when used

        return await open_postgres(
            url, data_path, migrate=migrate, node=node, standby_poll=standby_poll, cluster=cluster
        )
    return await open_database(data_path / DB_FILE, migrate=migrate)


def shown_location(url: str | None, data_path: Path) -> str:
    """Where the store is, for messages: the SQLite path, or the URL without its password."""
    if not url:
        return str(data_path / DB_FILE)
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    if parts.username:
        host = f"{parts.username}@{host}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
