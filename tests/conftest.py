"""Fixtures any test may ask for."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tests.pg_server import PgServer, running_server


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server for this test worker, started on first use (tests.pg_server)."""
    with running_server(in_memory=True) as server:
        if server is None:
            pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
        yield server


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cyclic garbage collector off for the test, after one collection: a finalizer it
    runs inside ``ast.parse`` (of an asyncio transport an earlier test left to the collector)
    trips CPython 3.11's recursion-depth check in the parser with a ``SystemError``."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
