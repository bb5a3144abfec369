"""Fixtures for scheduler tests: a migrated database with one thread."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.store.db import Database, open_database
from tests.unit.scheduler.support import add_thread


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = await open_database(tmp_path / "talon.db")
    yield database
    await database.close()


@pytest.fixture
async def thread_id(db: Database) -> int:
    return await add_thread(db)
