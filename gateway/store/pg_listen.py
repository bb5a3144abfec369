"""``LISTEN`` on a PostgreSQL channel, on a connection and a thread of its own.

A cluster node hears of work other nodes committed (migration 0027's trigger notifies
``talon_queue`` with the thread id of every new queue item) without polling for it. The
connection comes back after a failure, one second later; notifications sent while it was down
are lost, which the node's periodic sweep makes up for.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

import psycopg
from psycopg.conninfo import conninfo_to_dict

from gateway.store.pg_connection import KEEPALIVES

__all__ = ["Listener"]

log = logging.getLogger("talon.store")

_WAIT = 1.0  # seconds between looks at whether to stop, and before reconnecting


class Listener:
    """Hands each notification on ``channel`` that another connection than ``own_pid()``
    sent to ``on_notify(payload)``, on the event loop that called :meth:`start`."""

    def __init__(
        self, url: str, channel: str, on_notify: Callable[[str], None], *, own_pid: Callable[[], int | None]
    ) -> None:
        self._url = url
        self._channel = channel
        self._on_notify = on_notify
        self._own_pid = own_pid
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name=f"talon-listen-{self._channel}", daemon=True)
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
                    log.warning("listening for %s failed (%s); reconnecting", self._channel, exc)
                failed = True
                self._stopping.wait(_WAIT)

    def _listen(self) -> None:
        params = {**KEEPALIVES, **conninfo_to_dict(self._url), "application_name": "talon-listen"}
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(f'LISTEN "{self._channel}"')
            while not self._stopping.is_set():
                for note in conn.notifies(timeout=_WAIT):
                    if note.pid != self._own_pid() and self._loop is not None:
                        self._loop.call_soon_threadsafe(self._on_notify, note.payload)
