"""Roles one node of a cluster holds at a time: a bot's Telegram poller, the scheduler.

A role is an advisory lock on the node's writer connection, so the server frees it the
moment the holder is gone, and the node that tries next takes it. It is never let go while
the node runs: the node stops when that connection is lost (:mod:`gateway.store.node_watch`).
"""

from __future__ import annotations

import asyncio
import logging

from gateway.store.db import Database
from gateway.store.nodes import lock_key, try_lock

__all__ = ["RoleGate"]

log = logging.getLogger("talon.cluster")


class RoleGate:
    """The role ``name``: :meth:`wait` returns once this node holds it.

    Args:
        db (:class:`gateway.store.db.Database`): The node's database.
        name (:obj:`str`): What the role is, as a lock name (``telegram:main``, ``scheduler``).
        every (:obj:`float`): Seconds between tries while another node holds it.
    """

    def __init__(self, db: Database, name: str, every: float) -> None:
        self.db = db
        self.name = name
        self.every = every
        self.held = False

    async def wait(self) -> None:
        """Return once this node holds the role (at once when it does already)."""
        told = False
        while not self.held:
            self.held = await self.db.on_writer_session(try_lock, lock_key(self.name))
            if self.held:
                break
            if not told:
                log.info("%s runs on another node; this node takes over if that node is lost", self.name)
                told = True
            await asyncio.sleep(self.every)
        if told:
            log.info("%s: taken over by this node", self.name)
