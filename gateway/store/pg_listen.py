"""``LISTEN`` on PostgreSQL channels, on a connection and a thread of their own.

A cluster node hears of what other nodes committed without polling for it: migration 0027's
trigger notifies ``talon_queue`` with the thread id of every new queue item, migration 0028's
``talon_interactions`` with the id of every interaction asked or closed. The connection comes
back after a failure, one second later; notifications sent while it was down are lost, which
the node's periodic sweep makes up for.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping

import psycopg
from psycopg.conninfo import conninfo_to_dict

from gateway.store.pg_connection import KEEPALIVES

__all__ = ["Listener"]

log = logging.getLogger("talon.store")

_WAIT = 1.0  # seconds between looks at whether to stop, and before reconnecting


class Listener:
    """Hands each notification on a channel of ``handlers`` that another connection than
    ``own_pid()`` sent to that channel's handler (with the payload), on the event loop that
    called :meth:`start`."""

    def __init__(
        self, url: str, handlers: Mapping[str, Callable[[str], None]], *, own_pid: Callable[[], int | None]
    ) -> None:
        self._url = url
        self._handlers = dict(handlers)
        self._own_pid = own_pid
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="talon-listen", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, _WAIT * 3)

    def _run(self) -> None:
        failed = False
        while not self._stopping.is_set():
            try:
                self._listen()
                failed = False
            except psycopg.Error as exc:
                if not failed:  # once per outage, not once a second
                    log.warning("listening for %s failed (%s); reconnecting", ", ".join(self._handlers), exc)
                failed = True
                self._stopping.wait(_WAIT)

    def _listen(self) -> None:
        params = {**KEEPALIVES, **conninfo_to_dict(self._url), "application_name": "talon-listen"}
        with psycopg.connect(**params, autocommit=True) as conn:
            for channel in self._handlers:
                conn.execute(f'LISTEN "{channel}"')
            while not self._stopping.is_set():
                for note in conn.notifies(timeout=_WAIT):
                    handler = self._handlers.get(note.channel)
                    if handler is not None and note.pid != self._own_pid() and self._loop is not None:
                        self._loop.call_soon_threadsafe(handler, note.payload)
