"""Durable outbound delivery: one row per rendered chunk or file, sent in order per thread.

A row is marked ``sending`` (committed) before the platform call and ``sent`` after it,
so after a crash a row is never sent twice: rows left in ``sending`` are reconciled as
``unknown`` unless the connector's delivery is idempotent (``Connector.idempotent_send``).
A file row uploads the outbox's own copy (:mod:`gateway.outbox_spool`), removed once the
row's delivery has ended however it ended. While a channel is still starting (or its start
is being retried) its rows wait without spending attempts, so a slow start fails no reply.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence

from opentelemetry.trace import SpanKind

from connectors.base import Connector, ErrorClass, OutboundChunk, OutboundFile, RenderedChunk, SendResult
from connectors.streaming import editor_of
from gateway import otel
from gateway.config import OutboxSettings
from gateway.logs import log_retried
from gateway.metrics import OUTBOX_SEND_SECONDS, OUTBOX_SENDS
from gateway.outbox_spool import FileSpool
from gateway.store.db import Database
from gateway.store.outbox import (
    OutboxRow,
    ThreadAddress,
    claim_next,
    claimed_threads,
    drop_claims,
    enqueue_chunks,
    enqueue_files,
    finish_row,
    interrupted_rows,
    mark_sending,
    next_pending,
    open_file_paths,
    release_thread,
    retry_row,
    settle_interrupted,
    threads_with_pending,
    unclaimed_pending_threads,
)
from gateway.store.span_contexts import outbox_parent

__all__ = ["Delivered", "Outbox", "ThreadAddress", "enqueue_chunks", "enqueue_files", "next_pending"]

log = logging.getLogger("talon.outbox")

_NOT_UP_YET = frozenset({"starting", "retrying"})  # channel states in which rows wait, unspent
_NOT_UP_POLL = 0.5  # seconds between looks at such a channel


Delivered = Callable[[int, int, str], None]
"""Called after a row is sent: (outbox id, thread id, status)."""


class _ClaimLost(Exception):
    """A cluster node found another node holding the claim of the thread it was sending."""


class Outbox:
    """One sender per channel; within a channel, threads are served concurrently and each
    thread's rows strictly in order.

    On a cluster ``node``, a thread's rows are sent only while the node holds the thread's
    claim (renewed by the node's heartbeat, so it lasts ``claim_seconds`` past the node's
    last sign of life): one node at a time sends them, in order, and the claim is let go once
    nothing is left to send.
    """

    def __init__(
        self,
        db: Database,
        connectors: dict[str, Connector],
        settings: OutboxSettings,
        *,
        on_delivered: Delivered = lambda row_id, thread_id, status: None,
        spool: FileSpool | None = None,
        node: str | None = None,
        claim_seconds: float = 15.0,
    ):
        self.db = db
        self.node = node
        self.claim_seconds = claim_seconds
        self.spool = spool or FileSpool.beside(db.path)
        self.connectors = connectors
        self.settings = settings
        self.on_delivered = on_delivered
        self._threads: dict[int, asyncio.Task[None]] = {}
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._closing = False

    async def recover(self) -> None:
        """Settle rows a crash left in ``sending`` (on a cluster node, those of the threads its
        previous run held); then start delivering what is pending."""
        if self.node is not None:
            await self.take_over(await self.db.read(claimed_threads, [self.node]))
            await self.spool.sweep(await self.db.read(open_file_paths))
            return
        await self._settle_interrupted(None)
        # Copies of rows that just became ``unknown``, or of posts whose commit a crash
        # prevented, are no longer needed.
        await self.spool.sweep(await self.db.read(open_file_paths))
        for thread_id in await self.db.read(threads_with_pending):
            self.notify(thread_id)

    async def take_over(self, thread_ids: Sequence[int]) -> None:
        """The threads a lost node was sending: its rows in flight are settled as after a
        crash, its claims dropped, and what is pending is sent from here."""
        if thread_ids:
            await self._settle_interrupted(thread_ids)
            await self.db.run_transaction(drop_claims, thread_ids)
        for thread_id in thread_ids:
            self.notify(thread_id)

    async def sweep(self) -> None:
        """A cluster node starts the threads with rows to send that no node has claimed."""
        for thread_id in await self.db.read(unclaimed_pending_threads):
            self.notify(thread_id)

    async def _settle_interrupted(self, thread_ids: Sequence[int] | None) -> None:
        for row in await self.db.read(interrupted_rows, thread_ids):
            connector = self.connectors.get(row.channel)
            idempotent = connector is not None and connector.idempotent_send
            await self.db.run_transaction(
                settle_interrupted, row.id, resend=idempotent, error="interrupted while sending; not resent"
            )
            if not idempotent:
                log.warning("outbox row %s may or may not have been delivered before a crash", row.id)

    def notify(self, thread_id: int, next_row: OutboxRow | None = None) -> None:
        """Rows were committed for ``thread_id``: make sure its sender runs.

        ``next_row`` is the thread's next pending row as :func:`next_pending` read it in
        that commit; a sender that is already running finds the new rows itself.
        """
        if self._closing:
            return
        task = self._threads.get(thread_id)
        if task is None or task.done():
            self._threads[thread_id] = asyncio.create_task(
                self._drain(thread_id, next_row), name=f"outbox-{thread_id}"
            )

    async def _drain(self, thread_id: int, row: OutboxRow | None) -> None:
        try:
            if self.node is not None:
                row = await self._claim(thread_id)
            elif row is None:
                row = await self.db.read(next_pending, thread_id)
            while row is not None and not self._closing:
                wait = row.available_at - time.time()
                if wait > 0:
                    self._wake_later(thread_id, wait)
                    return  # a cluster node keeps the claim: the rows behind this one wait too
                row = await self._send_traced(row) if otel.enabled() else await self._send(row)
                if row is None and self.node is not None and thread_id not in self._timers:
                    # Let go of the thread, unless rows came meanwhile (then send them too).
                    row = await self.db.run_transaction(release_thread, thread_id, self.node)
        except _ClaimLost as lost:
            log.warning("outbox row %s is another node's to send now; leaving the thread to it", lost.args[0])
        except Exception as exc:
            log_retried(log, exc, "outbox sender for thread %s failed; will retry", thread_id)
            self._wake_later(thread_id, 1.0)
        finally:
            self._threads.pop(thread_id, None)

    async def _claim(self, thread_id: int) -> OutboxRow | None:
        assert self.node is not None
        now = time.time()
        return await self.db.run_transaction(claim_next, thread_id, self.node, now + self.claim_seconds, now)

    async def _mark_sending(self, row: OutboxRow) -> None:
        """Record that ``row`` is in flight, before the platform call: after a crash it is
        never resent blindly.

        Raises:
            _ClaimLost: a cluster node no longer holds the thread's claim.
        """
        if not await self.db.run_transaction(mark_sending, row.id, self.node):
            raise _ClaimLost(row.id)

    def _wake_later(self, thread_id: int, delay: float) -> None:
        old = self._timers.pop(thread_id, None)
        if old:
            old.cancel()
        self._timers[thread_id] = asyncio.get_running_loop().call_later(delay, self._timer_fired, thread_id)

    def _timer_fired(self, thread_id: int) -> None:
        self._timers.pop(thread_id, None)
        self.notify(thread_id)

    async def _send_traced(self, row: OutboxRow) -> OutboxRow | None:
        """:meth:`_send` in a ``talon.send`` span continuing the span of the run whose reply
        the row is (a row of no run's starts a trace of its own)."""
        parent = None
        if row.run_id is not None:  # the run's span, from memory unless it ran before a restart
            parent = otel.recent("run", row.run_id) or await self.db.read(outbox_parent, row.id)
        attributes = {
            "talon.outbox_id": row.id,
            "talon.thread_id": row.thread_id,
            "talon.channel": row.channel,
            "talon.seq": row.seq,
            "talon.attempt": row.attempts + 1,
            "talon.bytes": row.file_size if row.file_path else len(row.text.encode("utf-8", "surrogatepass")),
            "talon.file": row.file_path is not None,
            "talon.message.text": otel.content(row.plain) if row.file_path is None else None,
        }
        started = time.perf_counter()
        with otel.span("talon.send", parent=parent, attributes=attributes, kind=SpanKind.PRODUCER) as span:
            following = await self._send(row)  # _finish or a retry sets talon.outcome
            otel.set_attributes(span, {"talon.duration_ms": round((time.perf_counter() - started) * 1000, 3)})
            return following

    async def _send(self, row: OutboxRow) -> OutboxRow | None:
        """Deliver one row; returns the thread's next pending row (read in the same commit)."""
        connector = self.connectors.get(row.channel)
        if connector is None:
            return await self._finish(row, "failed", error=f"channel {row.channel!r} is not running")
        if connector.health.state in _NOT_UP_YET:
            # Its start is still under way (or being retried): trying now would only spend one
            # of the row's attempts on "not running", so a slow start could fail a reply.
            self._wake_later(row.thread_id, _NOT_UP_POLL)
            return None
        started = time.perf_counter()
        if row.drops_preview:
            try:
                dropped = await self._drop(row, connector)
            except Exception as exc:
                return await self._connector_raised(row, exc)
            return await self._settle(row, dropped, started)
        if row.edit_of is not None:
            try:
                replaced = await self._replace(row, connector)
            except _ClaimLost:
                raise
            except Exception as exc:
                return await self._connector_raised(row, exc)
            return await self._settle(row, replaced, started)
        if not connector.idempotent_send:
            await self._mark_sending(row)
        try:
            file = row.file
            if file is not None:
                result = await connector.send_file(
                    OutboundFile(
                        row.id, row.key, file.path, file.name, file.size, file.mime_type, row.reply_to
                    )
                )
            else:
                chunk = RenderedChunk(row.text, row.plain, row.format)
                result = await connector.send(OutboundChunk(row.id, row.key, chunk, row.reply_to))
        except Exception as exc:
            return await self._connector_raised(row, exc)
        return await self._settle(row, result, started)

    async def _replace(self, row: OutboxRow, connector: Connector) -> SendResult:
        """A reply's first chunk replacing its streamed preview: an edit, which is idempotent
        (the row is not marked ``sending``, so a crash leaves it to be edited again). A preview
        that can no longer be edited (deleted, too old) gets the chunk as a fresh message, sent
        like any other row, and is then deleted."""
        assert row.edit_of is not None
        chunk = RenderedChunk(row.text, row.plain, row.format)
        editor = editor_of(connector)
        if getattr(editor, "replaces_by_send", False):
            return await connector.send(OutboundChunk(row.id, row.key, chunk, row.reply_to, row.edit_of))
        if editor is not None:
            result = await editor.edit(row.key, row.edit_of, chunk)
            if result.ok or result.error_class is not ErrorClass.PERMANENT:
                return SendResult.sent(row.edit_of) if result.ok else result
            log.info("preview %s cannot be edited (%s); sending the reply fresh", row.edit_of, result.error)
        if not connector.idempotent_send:
            await self._mark_sending(row)
        result = await connector.send(OutboundChunk(row.id, row.key, chunk, row.reply_to))
        if result.ok and editor is not None:
            await editor.delete(row.key, row.edit_of)
        return result

    async def _drop(self, row: OutboxRow, connector: Connector) -> SendResult:
        """Remove a preview the reply was sent below: delete it, or where the platform refuses,
        edit it to the row's text. Both are idempotent: the row is retried, never ``unknown``."""
        assert row.edit_of is not None
        editor = editor_of(connector)
        if editor is None:
            return SendResult.failed(ErrorClass.PERMANENT, f"channel {row.channel} cannot delete messages")
        result = await editor.delete(row.key, row.edit_of)
        if result.error_class is ErrorClass.PERMANENT:
            log.info("preview %s cannot be deleted (%s); marking it", row.edit_of, result.error)
            result = await editor.edit(row.key, row.edit_of, RenderedChunk(row.text, row.plain, "plain"))
        if result.ok:
            return SendResult.sent(row.edit_of)
        if result.error_class is ErrorClass.AMBIGUOUS:  # trying again is safe
            return SendResult.failed(ErrorClass.TRANSIENT, result.error or "no answer", result.retry_after)
        return result

    async def _connector_raised(self, row: OutboxRow, exc: Exception) -> OutboxRow | None:
        """``send`` must classify platform errors, so an exception is a connector bug.

        A bug says nothing about whether the platform got the chunk, and marking it
        ``unknown`` would silently drop the reply: it is retried with backoff like a
        transient failure, and after the last attempt recorded as ``failed``. The
        traceback is logged once per row; retries log one line.
        """
        error = f"connector {row.channel} raised {type(exc).__name__}: {exc}"
        if row.attempts == 0:
            log.error("%s from send() (outbox row %s)", error, row.id, exc_info=exc)
        return await self._settle(row, SendResult.failed(ErrorClass.TRANSIENT, error))

    async def _settle(
        self, row: OutboxRow, result: SendResult, started: float | None = None
    ) -> OutboxRow | None:
        if started is not None:
            OUTBOX_SEND_SECONDS.labels(row.channel).observe(time.perf_counter() - started)
        if result.ok:
            OUTBOX_SENDS.labels(row.channel, "sent").inc()
            return await self._finish(row, "sent", platform_message_id=result.platform_message_id)
        elif result.error_class is ErrorClass.TRANSIENT and row.attempts + 1 < self.settings.max_attempts:
            delay = self._backoff(row.attempts, result.retry_after)
            OUTBOX_SENDS.labels(row.channel, "retried").inc()
            log.info("send to %s failed (%s); retrying in %.1fs", row.channel, result.error, delay)
            otel.set_attributes(otel.current_span(), {"talon.outcome": "retry", "error.type": "transient"})
            await self.db.run_transaction(
                retry_row, row.id, available_at=time.time() + delay, error=result.error
            )
            return await self.db.read(next_pending, row.thread_id)  # itself: its retry time
        status = "unknown" if result.error_class is ErrorClass.AMBIGUOUS else "failed"
        OUTBOX_SENDS.labels(row.channel, status).inc()
        log.error("send to %s %s: %s", row.channel, status, result.error)
        return await self._finish(row, status, error=result.error)

    def _backoff(self, attempts: int, retry_after: float | None) -> float:
        if retry_after:
            return retry_after  # the platform said when; sooner would only be refused again
        return self.settings.backoff.delay(attempts + 1)  # ``attempts`` counts the tries already made

    async def _finish(
        self,
        row: OutboxRow,
        status: str,
        *,
        platform_message_id: str | None = None,
        error: str | None = None,
    ) -> OutboxRow | None:
        now = time.time()
        send_span = otel.current_span()  # talon.send, when spans are exported
        otel.set_attributes(send_span, {"talon.outcome": status})
        if status != "sent":
            otel.failed(send_span, status)

        def finish(conn: sqlite3.Connection) -> OutboxRow | None:
            finish_row(conn, row.id, status, platform_message_id=platform_message_id, error=error, now=now)
            return next_pending(conn, row.thread_id)

        following = await self.db.run_keyed(("thread", row.thread_id), finish)
        if row.file_path is not None:
            await self.spool.discard([row.file_path])  # after the commit: until then the row may need it
        self.on_delivered(row.id, row.thread_id, status)
        return following

    async def flush(self, timeout: float) -> bool:
        """Wait until no row is due for sending (used at shutdown). True when drained."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = [t for t in self._threads.values() if not t.done()]
            if not busy:
                return True
            await asyncio.wait(busy, timeout=deadline - time.monotonic())
        return not any(not t.done() for t in self._threads.values())

    async def close(self) -> None:
        self._closing = True
        for timer in self._timers.values():
            timer.cancel()
        tasks = [t for t in self._threads.values() if not t.done()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
