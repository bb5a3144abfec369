"""A transaction's statements sent without waiting for each one's result (libpq's pipeline mode).

Between ``BEGIN`` and ``COMMIT`` (or ``ROLLBACK``) a :class:`~gateway.store.pg_connection.PgConnection`
sends each statement as it comes and reads its result only when the caller looks at it (its
rows or ``rowcount``) or the transaction ends. An ``INSERT`` whose cursor nobody reads costs no
wait, and ``BEGIN`` travels with the first statement. Each wait is a round trip to the server:
a reply's transactions hold about twenty statements and now wait 14 times instead of 22. In
``python -m bench.bench_e2e --postgres``, run alternately with and without this module
(2026-12-03), 4 threads answered at 0.39 to 0.45 times SQLite's rate against 0.37 to 0.38;
200 threads flat out showed no difference, bound by the server's CPU.

What changes for the caller: a statement that fails raises where its transaction is next
waited on, which may be a later statement or the ``COMMIT``, and the statements after it in
the transaction are not run. The store's callers run a transaction whole or not at all, so
only where the error is raised moves.
"""

from __future__ import annotations

import select
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import pq

__all__ = ["Pipeline", "Sent"]

_SYNC = pq.ExecStatus.PIPELINE_SYNC
_ABORTED = pq.ExecStatus.PIPELINE_ABORTED
_FAILED = pq.ExecStatus.FATAL_ERROR


@dataclass(slots=True)
class Sent:
    """One statement sent: its result once read (``done``), or the error its transaction ran into."""

    result: pq.abc.PGresult | None = None
    error: Exception | None = None
    done: bool = False
    on_failure: Callable[[], None] | None = None  # a prepare that failed: forget its name
    sync: bool = False


class Pipeline:
    """The pipeline of one connection's open transaction.

    ``error_of(result)`` is the exception a failed result raises (for the first failure; the
    statements after it are aborted with that same exception).
    """

    def __init__(self, pg: pq.abc.PGconn, error_of: Callable[[pq.abc.PGresult], Exception]) -> None:
        self._pg = pg
        self._error_of = error_of
        self._pending: deque[Sent] = deque()
        self._unrequested = False  # sent since the server was last asked to send results
        self.error: Exception | None = None
        # Called with a Sent whose result a caller needs, before it is read: another
        # transaction's statements may go out meanwhile (pg_interleave.py).
        self.park: Callable[[Sent], None] | None = None
        self._nonblocking = pg.nonblocking  # psycopg's connections are already
        pg.nonblocking = 1
        pg.enter_pipeline_mode()

    def send(
        self, query: bytes, values: Sequence[Any] | None, types: Sequence[int], formats: Sequence[int]
    ) -> Sent:
        self._pg.send_query_params(query, values, types, formats)
        return self._sent(Sent())

    def send_prepared(self, name: bytes, values: Sequence[Any], formats: Sequence[int]) -> Sent:
        self._pg.send_query_prepared(name, values, formats)
        return self._sent(Sent())

    def prepare(
        self, name: bytes, query: bytes, types: Sequence[int], on_failure: Callable[[], None]
    ) -> None:
        self._pg.send_prepare(name, query, types)
        self._sent(Sent(on_failure=on_failure))

    def settle(self, sent: Sent) -> None:
        """Read results until ``sent``'s is in."""
        if sent.done:
            return
        if self.park is not None:
            self._pg.flush()  # non-blocking: the server runs what came so far (pg_interleave.py)
            self.park(sent)
            if sent.done:
                return
        if self._unrequested:
            self._pg.send_flush_request()
            self._unrequested = False
        self._flush()
        while not sent.done:
            if not self._pending:  # its result was being read when the connection broke
                raise self._lost()
            self._read_next()

    def end(self, statement: bytes) -> Exception | None:
        """Send ``statement`` (``COMMIT`` or ``ROLLBACK``), read every result and leave pipeline
        mode. Returns the first error of the transaction, or of ``statement`` itself.

        A ``ROLLBACK`` goes after a sync of its own, so that it runs even when an error aborted
        the statements before it."""
        pg = self._pg
        if statement.startswith(b"ROLLBACK"):
            pg.pipeline_sync()
            self._pending.append(Sent(sync=True))
        pg.send_query_params(statement, None)
        last = self._sent(Sent())
        pg.pipeline_sync()
        self._pending.append(Sent(sync=True))
        self._drain()
        return self.error or last.error

    def leave(self) -> Exception | None:
        """Read every result and leave pipeline mode, the transaction still open (for psycopg's
        own calls, which run without a pipeline). Returns the transaction's first error."""
        self._pg.pipeline_sync()
        self._pending.append(Sent(sync=True))
        self._drain()
        return self.error

    def _drain(self) -> None:
        self._flush()
        while self._pending:
            self._read_next()
        self._pg.exit_pipeline_mode()
        self._pg.nonblocking = self._nonblocking

    def _sent(self, sent: Sent) -> Sent:
        self._pending.append(sent)
        self._unrequested = True
        return sent

    def _read_next(self) -> None:
        sent = self._pending.popleft()
        result = self._result()
        if sent.sync:
            if result is None or result.status != _SYNC:
                raise self._lost()
            sent.done = True
            return
        if result is None or self._result() is not None:  # a statement's one result, then None
            raise self._lost()
        if result.status not in (_ABORTED, _FAILED):
            sent.result = result
        else:  # failed, or aborted by the failure before it
            self.error = self.error or self._error_of(result)
            sent.error = self.error
            if sent.on_failure is not None:  # a PREPARE that failed or never ran
                sent.on_failure()
        sent.done = True

    def _lost(self) -> psycopg.OperationalError:
        """The results are not in the order sent: the connection broke off mid-stream."""
        message = self._pg.get_error_message() or "the connection to PostgreSQL was lost"
        return psycopg.OperationalError(message)

    def _result(self) -> pq.abc.PGresult | None:
        pg = self._pg
        while pg.is_busy():
            _wait(pg, select.POLLIN)
            pg.consume_input()
        return pg.get_result()

    def _flush(self) -> None:
        pg = self._pg
        while pg.flush() == 1:  # the socket is full: the server is sending results meanwhile
            _wait(pg, select.POLLIN | select.POLLOUT)
            pg.consume_input()


def _wait(pg: pq.abc.PGconn, events: int) -> None:
    """Until the connection's socket is ready (poll releases the GIL; libpq's calls would not)."""
    poller = select.poll()
    poller.register(pg.socket, events)
    poller.poll()
