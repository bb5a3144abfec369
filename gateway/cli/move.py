"""``talon migrate --to postgresql://...``: move a SQLite store to PostgreSQL."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from gateway.cli.common import fail

__all__ = ["copy_to_postgres"]


def copy_to_postgres(settings: Any, url: str) -> int:
    """Copy ``settings``' SQLite store into the empty database at ``url``; the daemon must be
    stopped (the caller holds the data directory's lock)."""
    from gateway.database_settings import DatabaseSettings
    from gateway.store.copy import CopyError, TableCopy, copy_sqlite_to_postgres, open_source
    from gateway.store.db import DB_FILE, SchemaTooNewError
    from gateway.store.engines import shown_location
    from gateway.store.pg_connection import connect
    from gateway.store.postgres import apply_migrations

    try:
        DatabaseSettings(url=url)
    except ValueError as exc:
        return fail(f"--to: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")  # type: ignore[attr-defined]
    shown = shown_location(url, settings.data_path)
    if settings.database.url:
        return fail("database.url already names a PostgreSQL database; --to copies the SQLite file")
    started = time.monotonic()
    try:
        source = open_source(settings.data_path / DB_FILE)
    except CopyError as exc:
        return fail(str(exc))
    try:
        target = connect(url, application_name="talon-migrate")
    except sqlite3.OperationalError as exc:
        source.close()
        return fail(f"cannot open the database at {shown}: {exc}")

    def progress(copy: TableCopy) -> None:
        if copy.rows:
            print(f"  {copy.table:<28} {copy.rows:>9,} rows", flush=True)

    try:
        apply_migrations(target)
        copies = copy_sqlite_to_postgres(source, target, progress)
    except (CopyError, SchemaTooNewError) as exc:
        return fail(str(exc))
    except sqlite3.Error as exc:
        return fail(f"the copy to {shown} failed, nothing was kept: {exc}")
    finally:
        target.close()
        source.close()
    rows = sum(c.rows for c in copies)
    print(
        f"copied {rows:,} rows of {len(copies)} tables to {shown} in {time.monotonic() - started:.1f} s; "
        "every table's row count matches.\n"
        "To switch, put the URL in the environment (TALON_DATABASE_URL) and add to talon.yaml:\n"
        "  database:\n"
        "    url: ${TALON_DATABASE_URL}\n"
        f"then start `talon run`. The SQLite file stays as it was ({settings.data_path / DB_FILE})."
    )
    return 0
