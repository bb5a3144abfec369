"""A node's hold on a PostgreSQL database: its writer connection holds the node lock, so when
that connection is gone (the server restarted, the network broke, an operator ended it), the
lock may already be a standby's. The daemon then stops rather than go on polling platforms it
can no longer record for (docs/scaling.md)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from typing import Any

from gateway.store.db import Database

__all__ = ["watch_node_lock"]

log = logging.getLogger("talon.store")


def _touch(conn: Any) -> None:
    conn.execute("SELECT 1")


async def watch_node_lock(db: Database, on_lost: Callable[[], None], every: float = 1.0) -> None:
    """Check the writer's connection every ``every`` seconds; when it fails, log, call
    ``on_lost`` once and return."""
    while True:
        await asyncio.sleep(every)
        try:
            await db.run_transaction(_touch)
        except sqlite3.Error as exc:
            log.error(
                "lost the database connection that holds this node's lock (%s); stopping, so that "
                "a standby can take over",
                exc,
            )
            on_lost()
            return
