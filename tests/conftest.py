"""Fixtures any test may ask for."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pg_server import PgServer, running_server


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server for this test worker, started on first use (tests.pg_server)."""
    with running_server() as server:
        if server is None:
            pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
        yield server
