"""A database connection on a thread of its own, driven from the event loop.

SQLite calls block, and so do psycopg's synchronous ones, so each connection the store keeps
lives on one thread: coroutines hand it plain functions of the connection and await their
results. A function runs whole on that thread, however many statements it has, which is what
makes a transaction one hop.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from queue import SimpleQueue
from typing import Any, TypeVar

__all__ = ["ConnectionThread"]

T = TypeVar("T")

_Call = tuple["asyncio.Future[Any]", Callable[[sqlite3.Connection], Any] | None]


def _settle(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():  # its caller may have been canceled meanwhile
        future.set_result(result)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _connect_sqlite(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


class ConnectionThread:
    """One connection and the one thread that uses it: a ``sqlite3.Connection`` (rows as
    ``sqlite3.Row``, autocommit mode) from :meth:`open`, or whatever :meth:`start`'s
    ``connect`` returns.

    Calls run one at a time, in the order they were made.
    """

    def __init__(self, name: str) -> None:
        self._calls: SimpleQueue[_Call] = SimpleQueue()
        self._name = name
        self._closed = False

    @classmethod
    async def open(cls, path: Path, *, name: str) -> ConnectionThread:
        """Connect to the SQLite file ``path`` on a new thread called ``name``.

        Raises:
            sqlite3.Error: the database cannot be opened.
        """
        return await cls.start(partial(_connect_sqlite, path), name=name)

    @classmethod
    async def start(cls, connect: Callable[[], Any], *, name: str) -> ConnectionThread:
        """Run ``connect()`` on a new thread called ``name``; the connection it returns (which
        has ``close()``) is the one every call gets.

        Raises:
            Exception: what ``connect`` raised.
        """
        worker = cls(name)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        threading.Thread(target=worker._serve, args=(connect, ready), name=name, daemon=True).start()
        await ready
        return worker

    def _serve(self, connect: Callable[[], Any], ready: asyncio.Future[None]) -> None:
        loop = ready.get_loop()
        try:
            conn = connect()
        except BaseException as exc:
            loop.call_soon_threadsafe(_fail, ready, exc)
            return
        loop.call_soon_threadsafe(_settle, ready, None)
        try:
            while True:
                future, fn = self._calls.get()
                if fn is None:
                    break
                try:
                    result = fn(conn)
                except BaseException as exc:
                    future.get_loop().call_soon_threadsafe(_fail, future, exc)
                else:
                    future.get_loop().call_soon_threadsafe(_settle, future, result)
        finally:
            conn.close()
        future.get_loop().call_soon_threadsafe(_settle, future, None)

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` on the connection's thread; its result, or the exception it raised.

        ``fn`` must not block on anything but SQLite: every other call waits behind it.

        Raises:
            ValueError: the connection is closed.
        """
        if self._closed:
            raise ValueError(f"the database connection {self._name!r} is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._calls.put((future, fn))
        return await future

    async def close(self) -> None:
        """Close the connection once the calls made before have run; the thread then ends."""
        if self._closed:
            return
        self._closed = True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._calls.put((future, None))
        await future
