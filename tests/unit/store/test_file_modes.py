"""The database file and its WAL companions are readable by their owner only."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.store.db import open_database
from tests.store_helpers import execute_sql


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The common default, under which SQLite would create 0644 files."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_new_database_and_its_wal_and_shm_are_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "data" / "talon.db"
    db = await open_database(path)
    try:
        await execute_sql(
            db, "INSERT INTO threads (channel, chat_id, created_at, updated_at) VALUES ('console', 'c', 0, 0)"
        )
        files = [path, path.with_name("talon.db-wal"), path.with_name("talon.db-shm")]
        assert {f.name: oct(mode(f)) for f in files} == {f.name: "0o600" for f in files}
    finally:
        await db.close()


async def test_a_backup_is_owner_only(tmp_path: Path) -> None:
    db = await open_database(tmp_path / "talon.db")
    try:
        target = tmp_path / "backups" / "copy.db"
        await db.backup(target)
    finally:
        await db.close()
    assert oct(mode(target)) == "0o600"
