"""The durable per-thread FIFO: one running turn per thread, many threads in parallel.

Items are leased in batches: every pending ``message`` item of a thread is taken
together (messages that arrived while the thread was busy join the next turn); other
kinds run one at a time. A lease carries an expiry; leases left by a dead process are
released at start (the data-dir lock guarantees that process is gone).

A turn that fails because something outside it failed (the model provider, the time limit,
a :class:`~gateway.errors.TransientError` such as a reply that could not be saved, a busy
database) is retried with backoff up to ``max_attempts``. Any other exception is a bug in
turn code: it is tried once more, in case it was a race, then dead-lettered as an internal
error, its traceback logged once.

An item other than a message may carry its own retry policy in its payload (``retry``:
``max_attempts``, ``delay`` and ``max_delay`` in seconds, the delay doubling per attempt), as a
schedule's does; ``on_retry`` hears of each retry that policy grants.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from gateway.backoff import Backoff
from gateway.config import QueueSettings
from gateway.errors import TransientError
from gateway.logs import log_retried
from gateway.metrics import TURN_SECONDS, TURNS
from gateway.runtime.model import ProviderError
from gateway.store.db import Database, WriteConflictError
from gateway.store.queue import (
    Batch,
    LeaseLostError,
    complete_items,
    end_items,
    keep_run,
    lease_batch,
    pending_threads,
    recover_leases,
    release_items,
    unleased_pending_threads,
)
from gateway.store.queue import dead_letters as _dead_letters
from gateway.store.runs import interrupt_running

log = logging.getLogger("talon.queue")


class ReplyNotSavedError(TransientError):
    """The model answered but its reply could not be committed. The answer is kept (see
    :func:`keep_run_in`), so retrying the batch does not call the model again.

    ``reason`` says what failed in words fit for the chat.
    """

    def __init__(self, message: str, *, reason: str):
        super().__init__(message)
        self.reason = reason


class TurnHandler:
    """What the queue runs. ``run`` must call :func:`complete_in` inside its commit (also
    when it ends with nothing to say); raising hands the batch back to the queue."""

    def begin(self, conn: sqlite3.Connection, batch: Batch) -> Any:
        """Runs inside the lease's transaction, on the database thread: what the turn reads
        and records as it starts, committed with the lease in the same round trip. Its
        result is handed to :meth:`run`."""
        return None

    async def run(self, batch: Batch, begun: Any) -> None:
        raise NotImplementedError

    async def gave_up(
        self, batch: Batch, error: str, *, canceled: bool, failure: BaseException | None = None
    ) -> None:
        """The batch ended without a reply: canceled, or failed for good (dead-lettered).
        ``failure`` is the last attempt's exception, when one ended it."""


def complete_in(conn: sqlite3.Connection, batch: Batch, run_id: int | None) -> None:
    """Mark a batch done inside the caller's transaction (atomic with its reply)."""
    complete_items(conn, batch.ids, run_id, time.time())


def keep_run_in(conn: sqlite3.Connection, batch: Batch, run_id: int) -> None:
    """Point a batch at the run that kept its answer, inside the caller's transaction: its
    next lease takes exactly these items again, and the turn resumes from that run."""
    keep_run(conn, batch.ids, run_id)


OnRetry = Callable[[Batch, str, float], Awaitable[None]]


class TurnQueue:
    """The turns of every thread, ``settings.workers`` at a time.

    On a cluster ``node`` the lease of a thread's items is the node's, and a thread another
    node's turn holds is left to that node, which looks for more work when its turn ends.
    """

    def __init__(
        self,
        db: Database,
        settings: QueueSettings,
        handler: TurnHandler,
        *,
        on_retry: OnRetry | None = None,
        node: str | None = None,
    ):
        self.db = db
        self.node = node
        self.settings = settings
        self.handler = handler
        self._on_retry = on_retry
        self._ready: dict[int, None] = {}  # insertion-ordered set of threads with work
        self._running: dict[int, asyncio.Task[None]] = {}
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._wake = asyncio.Event()
        self._stopping = False
        self._dispatcher: asyncio.Task[None] | None = None
        self._parked = 0
        self._in_turn: set[int] = set()  # threads whose turn is inside handler.run
        self._stop_next: set[int] = set()  # /stop arrived while the thread's turn was starting
        self._crashes: dict[int, int] = {}  # a thread's failed leases in a row
        self._bugs: dict[int, str] = {}  # first item id -> the internal error its last attempt hit
        self._persona_labels: dict[int, str] = {}  # thread -> the persona its running turn answers as

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        await self._recover()
        self._dispatcher = asyncio.create_task(self._dispatch(), name="queue-dispatcher")

    async def _recover(self) -> None:
        now = time.time()

        def recover(conn: sqlite3.Connection) -> int:
            released = recover_leases(conn, self.settings.max_attempts, now, self.node)
            interrupt_running(conn, now, self.node)
            return released

        released = await self.db.run_transaction(recover)
        if released:
            log.warning("released %d queue items interrupted by a previous stop", released)
        await self._schedule_pending()

    async def sweep(self) -> None:
        """A cluster node starts the threads with due work that no turn holds (a lost node's
        work, or a notification that did not arrive)."""
        await self._schedule_pending(unleased_pending_threads)

    async def _schedule_pending(
        self, which: Callable[[sqlite3.Connection], list[tuple[int, float]]] = pending_threads
    ) -> None:
        pending = await self.db.read(which)
        now = time.time()
        for thread_id, due in pending:
            if thread_id in self._running or thread_id in self._timers:
                continue
            self._notify_at(thread_id, due - now)

    async def stop(self, grace: float) -> None:
        """Stop taking work; give running turns ``grace`` seconds, then cancel them (their
        items return to pending and run again after the next start)."""
        self._stopping = True
        self._wake.set()
        for timer in self._timers.values():
            timer.cancel()
        running = [t for t in self._running.values() if not t.done()]
        if running:
            log.info("waiting up to %.0fs for %d running turns", grace, len(running))
            _, pending = await asyncio.wait(running, timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._dispatcher:
            await asyncio.gather(self._dispatcher, return_exceptions=True)

    # ------------------------------------------------------------ intake side

    def notify(self, thread_id: int) -> None:
        """Work was committed for ``thread_id``."""
        if self._stopping:
            return
        self._ready[thread_id] = None
        self._wake.set()

    def _notify_at(self, thread_id: int, delay: float) -> None:
        if delay <= 0:
            self.notify(thread_id)
            return
        old = self._timers.pop(thread_id, None)
        if old:
            old.cancel()

        def fire() -> None:
            self._timers.pop(thread_id, None)
            self.notify(thread_id)

        self._timers[thread_id] = asyncio.get_running_loop().call_later(delay, fire)

    def busy(self, thread_id: int) -> bool:
        task = self._running.get(thread_id)
        return task is not None and not task.done()

    def cancel(self, thread_id: int) -> bool:
        """``/stop``: cancel the thread's running turn. True when one was running.

        Only a turn inside ``handler.run`` is cancelled at once. A worker that is still
        leasing must not be: its lease may commit on the database thread after the task was
        cancelled, which would leave the items leased with nobody to run them. That turn is
        ended as cancelled as soon as its lease is in hand.
        """
        task = self._running.get(thread_id)
        if task is None or task.done():
            return False
        if thread_id in self._in_turn:
            task.cancel(msg="stop")
        else:
            self._stop_next.add(thread_id)
        return True

    @contextmanager
    def parked(self) -> Iterator[None]:
        """A running turn waits on work queued elsewhere (a delegated task): while it
        waits, its worker slot does not count, so the work it waits for can run."""
        self._parked += 1
        self._wake.set()
        try:
            yield
        finally:
            self._parked -= 1

    @property
    def running_count(self) -> int:
        return sum(1 for t in self._running.values() if not t.done())

    # ------------------------------------------------------------ dispatch

    async def _dispatch(self) -> None:
        while not self._stopping:
            await self._wake.wait()
            self._wake.clear()
            for thread_id in list(self._ready):
                if self._stopping or len(self._running) >= self.settings.workers + self._parked:
                    break
                if thread_id in self._running:
                    continue  # the running worker picks the new items up when it loops
                del self._ready[thread_id]
                self._running[thread_id] = asyncio.create_task(
                    self._serve(thread_id), name=f"turn-{thread_id}"
                )

    async def _serve(self, thread_id: int) -> None:
        try:
            while not self._stopping:
                self._ready.pop(thread_id, None)
                leased = await self._lease(thread_id)
                self._crashes.pop(thread_id, None)
                if isinstance(leased, float):  # nothing due yet: come back when it is
                    self._notify_at(thread_id, leased - time.time())
                    return
                if leased is None:
                    return
                batch, begun = leased
                await self._run(batch, begun)
                if thread_id not in self._ready and not batch.more and self.node is None:
                    # Nothing was queued for this thread while it ran. (A cluster node looks
                    # anyway: another node's intake may have queued work it could not start.)
                    return
        except Exception as exc:
            # A failed lease rolled back, so the thread's items are still pending: without
            # a retry they would wait for the thread's next message or the next start.
            crashes = self._crashes[thread_id] = self._crashes.get(thread_id, 0) + 1
            delay = self.settings.backoff.delay(crashes)
            log_retried(
                log, exc, "queue worker for thread %s crashed; trying again in %.1fs", thread_id, delay
            )
            self._notify_at(thread_id, delay)
        finally:
            self._running.pop(thread_id, None)
            self._stop_next.discard(thread_id)
            self._wake.set()  # a worker slot is free

    async def _lease(self, thread_id: int) -> tuple[Batch, Any] | float | None:
        def lease(conn: sqlite3.Connection) -> tuple[Batch, Any] | float | None:
            batch = lease_batch(conn, thread_id, self.settings.lease_seconds, time.time(), self.node)
            return (batch, self.handler.begin(conn, batch)) if isinstance(batch, Batch) else batch

        return await self.db.run_keyed(("thread", thread_id), lease)

    async def _run(self, batch: Batch, begun: Any) -> None:
        self._persona_labels[batch.thread_id] = _persona_of(begun)
        try:
            await self._run_turn(batch, begun)
        finally:
            self._persona_labels.pop(batch.thread_id, None)

    async def _run_turn(self, batch: Batch, begun: Any) -> None:
        bug_before = self._bugs.pop(batch.items[0].id, None)
        if batch.thread_id in self._stop_next:
            self._stop_next.discard(batch.thread_id)
            await self._stopped(batch)
            return
        started = time.perf_counter()
        try:
            self._in_turn.add(batch.thread_id)
            try:
                await self.handler.run(batch, begun)
            finally:
                self._in_turn.discard(batch.thread_id)  # from here on /stop waits for the next turn
                TURN_SECONDS.labels(self._persona_labels[batch.thread_id]).observe(
                    time.perf_counter() - started
                )
            TURNS.labels(self._persona_labels[batch.thread_id], "completed").inc()
        except asyncio.CancelledError as exc:
            if self._stopping and exc.args != ("stop",):
                await self._release(batch)
                raise
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()  # /stop ends this turn only; the worker carries on
            await self._stopped(batch)
            return
        except Exception as exc:
            if not _lease_lost(exc):
                await self._turn_failed(batch, exc, bug_before)
                return
            log.warning(
                "turn on thread %s dropped: another node took its lease back while it ran", batch.thread_id
            )

    async def _turn_failed(self, batch: Batch, exc: Exception, bug_before: str | None) -> None:
        """Retry or dead-letter the batch, by what ``exc`` says of the turn."""
        if isinstance(exc, ProviderError):
            await self._failed(batch, exc, str(exc), transient=exc.transient, retry_after=exc.retry_after)
        elif isinstance(exc, TimeoutError):
            await self._failed(batch, exc, "turn timed out", transient=True)
        elif isinstance(exc, TransientError):  # a ReplyNotSavedError was logged with its cause
            await self._failed(batch, exc, str(exc), transient=True)
        elif _database_busy(exc):
            await self._failed(batch, exc, f"database busy: {exc}", transient=True)
        else:
            await self._bug(batch, exc, bug_before)

    async def _stopped(self, batch: Batch) -> None:
        TURNS.labels(self._persona_labels.get(batch.thread_id, ""), "canceled").inc()
        await self._end(batch, "canceled", "stopped by /stop")
        await self.handler.gave_up(batch, "stopped by /stop", canceled=True)

    async def _bug(self, batch: Batch, exc: Exception, before: str | None) -> None:
        """``exc`` is a bug in turn code: one more try unless the last one hit it too."""
        error = f"internal error: {type(exc).__name__}: {exc}"
        if error != before:  # the same bug twice in a row is logged once
            log.error("turn on thread %s hit an internal error", batch.thread_id, exc_info=exc)
        retry = before is None and batch.attempts < self.settings.max_attempts
        if retry:
            self._bugs[batch.items[0].id] = error
        await self._failed(batch, exc, error, transient=retry)

    async def _failed(
        self,
        batch: Batch,
        failure: BaseException,
        error: str,
        *,
        transient: bool,
        retry_after: float | None = None,
    ) -> None:
        max_attempts, backoff = _retry_policy(batch, self.settings)
        if transient and batch.attempts < max_attempts:
            delay = retry_after or backoff.delay(batch.attempts)
            log.warning(
                "turn on thread %s failed (attempt %d/%d), retrying in %.1fs: %s",
                batch.thread_id,
                batch.attempts,
                max_attempts,
                delay,
                error,
            )
            TURNS.labels(self._persona_labels.get(batch.thread_id, ""), "retried").inc()
            await self._release(batch, delay=delay, error=error)
            if self._on_retry is not None:
                try:
                    await self._on_retry(batch, error, delay)
                except Exception:  # a listener's failure must not lose the retry
                    log.exception("on_retry failed for thread %s", batch.thread_id)
            self._notify_at(batch.thread_id, delay)
            return
        log.error("turn on thread %s failed for good, dead-lettered: %s", batch.thread_id, error)
        TURNS.labels(self._persona_labels.get(batch.thread_id, ""), "dead").inc()
        await self._end(batch, "dead", error)
        await self.handler.gave_up(batch, error, canceled=False, failure=failure)

    async def _release(self, batch: Batch, *, delay: float = 0.0, error: str | None = None) -> None:
        now = time.time()
        await self.db.run_transaction(
            release_items, batch.ids, available_at=now + delay, error=error, now=now, node=batch.node
        )

    async def _end(self, batch: Batch, status: str, error: str) -> None:
        await self.db.run_transaction(end_items, batch.ids, status, error, time.time(), batch.node)


def _persona_of(begun: Any) -> str:
    """The persona a turn runs as, when the handler's start says (a label; never an id)."""
    persona = getattr(begun, "persona", None)
    return str(getattr(persona, "name", "") or "")


def _retry_policy(batch: Batch, settings: QueueSettings) -> tuple[int, Backoff]:
    """Attempts and delays for ``batch``: its one item's own ``retry`` policy, else the queue's."""
    policy = batch.items[0].payload.get("retry") if len(batch.items) == 1 else None
    if not isinstance(policy, dict):
        return settings.max_attempts, settings.backoff
    try:
        base = float(policy["delay"])
        return int(policy["max_attempts"]), Backoff(base, max(base, float(policy["max_delay"])), jitter=0)
    except (KeyError, TypeError, ValueError):
        log.warning("ignoring a malformed retry policy on queue item %s", batch.items[0].id)
        return settings.max_attempts, settings.backoff


def _lease_lost(exc: BaseException) -> bool:
    """``exc`` is (or was caused by) a cluster lease another node took back."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, LeaseLostError):
            return True
        seen = seen.__cause__
    return False


def _database_busy(exc: Exception) -> bool:
    """SQLite gave up waiting for a lock another connection or process held, or another
    node's transactions kept conflicting with this one's."""
    if isinstance(exc, WriteConflictError):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.OperationalError)
        and code is not None
        and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    )


async def dead_letters(db: Database, limit: int = 20) -> list[dict[str, Any]]:
    """Recently dead-lettered items, for ``talon status``."""
    return [asdict(letter) for letter in await db.read(_dead_letters, limit)]
