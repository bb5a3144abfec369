"""Run traces: what a run did, buffered while it runs and written once when it ends.

A :class:`RunTrace` is made per run by the turn runner and handed to the agent loop, which
records every model call (model, tokens in/out, latency, stop reason) and tool call (name,
decision, duration, result bytes, error class); the turn runner adds the phases (turn start,
turn end and outcome) and the loop a ``budget`` event when a budget runs out. The events stay
in memory and are written in the transaction that commits the turn (or records its failure),
so tracing adds no write of its own to a turn. A crash mid-turn loses that turn's buffered
events; the retried turn records its own.

Content — the system prompt, the messages a model call sent, tool arguments and results,
the model's text — is recorded only with ``traces.content: true`` in talon.yaml, each field
cut at :data:`CONTENT_CHARS`; without it a trace holds names, sizes, timings, tokens and error
classes only. A run keeps at most :data:`MAX_EVENTS` events; later ones are counted in a final
``phase`` event ``events_dropped``.

Retention (``traces.retention_days``) is kept the way the store keeps expired state: one
write in :data:`PURGE_EVERY` also deletes up to :data:`PURGE_PER_WRITE` times that many events
older than the retention, so the sweep keeps pace with the runs that add events, and most
replies' commits skip the statement (a round trip on PostgreSQL).

Children (for the code that starts child agents): the parent's trace is
:attr:`tools.base.ToolContext.trace`. Call

- ``trace.child_started(child_run_id, name=..., mode=...)`` when a child starts and
  ``trace.child_ended(child_run_id, status=..., input_tokens=..., output_tokens=...,
  error_class=...)`` when it ends: two ``child`` events in the parent's trace;
- ``trace.child_trace(child_run_id, persona=..., thread_id=...)`` for the child's own trace
  (its ``root_run_id`` is the parent's root), to pass to :func:`gateway.runtime.agent.run_agent`;
  a child that ends with its parent's turn leaves its events in the same buffer; one that
  outlives the turn (a background job) writes them with ``await child.flush(db)``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from gateway import otel
from gateway.store.traces import EventRow, TraceEvent, add_events, purge_before

if TYPE_CHECKING:
    import sqlite3

    from gateway.budgets import BudgetLimit
    from gateway.runtime.model import ChatMessage, Usage
    from gateway.store.db import Database

__all__ = [
    "CONTENT_CHARS",
    "MAX_EVENTS",
    "NULL_TRACE",
    "PURGE_EVERY",
    "PURGE_PER_WRITE",
    "NullTrace",
    "RunTrace",
]

MAX_EVENTS = 2000  # per run: 100 model calls with a few tool calls each fit with room
CONTENT_CHARS = 16_000  # per content field, when content is recorded
PURGE_PER_WRITE = 500  # old events swept per write: more than a run adds, few enough to stay quick
PURGE_EVERY = 16  # writes per sweep, which deletes up to PURGE_EVERY * PURGE_PER_WRITE events
_writes = itertools.count()  # trace writes in this process, to pick the ones that sweep
_PROMPT_MESSAGES = 4  # the newest messages a model call's recorded prompt shows


class RunTrace:
    """The buffered trace of one run.

    Args:
        run_id (:obj:`int`): The ``runs`` row.
        persona (:obj:`str`): Whose run it is (a persona sees only its own traces).
        thread_id (:obj:`int` | :obj:`None`): The run's thread.
        root_run_id (:obj:`int` | :obj:`None`): The root of its delegation tree; ``None`` for a root.
        content (:obj:`bool`): Record content too (``traces.content``).
        retention_days (:obj:`float` | :obj:`None`): Each write deletes old events past this
            age (``traces.retention_days``); ``None``: it deletes none.
        clock (Callable[[], :obj:`float`], optional): Unix seconds.
    """

    def __init__(
        self,
        run_id: int,
        *,
        persona: str,
        thread_id: int | None,
        root_run_id: int | None = None,
        content: bool = False,
        retention_days: float | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.run_id = run_id
        self.persona = persona
        self.thread_id = thread_id
        self.root_run_id = root_run_id
        self.content = content
        self.retention_days = retention_days
        self._clock = clock
        self._events: list[TraceEvent] = []
        self._seq = 0
        self._dropped = 0
        # OpenTelemetry: the run's span (current where the run's trace is made) and the model
        # or tool call's span open now, which the call's record annotates.
        self._run_span = otel.current_span()
        self._call_spans: list[Any] = []
        self._totals = {"talon.input_tokens": 0, "talon.output_tokens": 0, "talon.model_calls": 0}

    # ------------------------------------------------------------ recording

    @contextlib.contextmanager
    def span(self, kind: str, name: str) -> Iterator[None]:
        """An OpenTelemetry span ``talon.<kind>`` (``model`` or ``tool``) around one call; the
        call's :meth:`model_call` or :meth:`tool_call` inside it fills in its attributes."""
        if not otel.enabled():
            yield
            return
        ids = {"talon.run_id": self.run_id, "talon.thread_id": self.thread_id, "talon.persona": self.persona}
        with otel.span(f"talon.{kind}", attributes={**ids, f"talon.{kind}.name": name}) as opened:
            self._call_spans.append(opened)
            try:
                yield
            finally:
                self._call_spans.pop()

    def model_call(
        self,
        *,
        model: str,
        usage: Usage,
        latency_ms: float,
        stop_reason: str,
        tool_calls: int,
        system: str | None = None,
        messages: Sequence[ChatMessage] = (),
        text: str = "",
        error_class: str | None = None,
    ) -> None:
        """One model call (``error_class``: why it failed); ``system``, ``messages`` and
        ``text`` are kept only with content on."""
        payload: dict[str, Any] = {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "stop_reason": stop_reason,
            "tool_calls": tool_calls,
        }
        if self.content:
            if system is not None:
                payload["system"] = _cut(system)
            payload["prompt"] = [
                {"role": m.role, "content": _cut(m.content)} for m in messages[-_PROMPT_MESSAGES:]
            ]
            payload["text"] = _cut(text)
        self._add("model_call", model, payload, duration_ms=latency_ms, error_class=error_class)
        if self._call_spans:
            self._totals["talon.input_tokens"] += usage.input_tokens
            self._totals["talon.output_tokens"] += usage.output_tokens
            self._totals["talon.model_calls"] += 1
            self._annotate(
                {
                    "gen_ai.request.model": model,
                    "gen_ai.usage.input_tokens": usage.input_tokens,
                    "gen_ai.usage.output_tokens": usage.output_tokens,
                    "talon.stop_reason": stop_reason,
                    "talon.tool_calls": tool_calls,
                    "talon.duration_ms": round(latency_ms, 3),
                    "talon.model.system": otel.content(system),
                    "talon.model.prompt": otel.content(
                        json.dumps(
                            [{"role": m.role, "content": m.content} for m in messages[-_PROMPT_MESSAGES:]],
                            ensure_ascii=False,
                        )
                    )
                    if otel.content_on()
                    else None,
                    "talon.model.text": otel.content(text),
                },
                error_class,
            )

    def tool_call(
        self,
        *,
        name: str,
        decision: str,
        duration_ms: float,
        result_bytes: int,
        error_class: str | None,
        arguments: dict[str, Any] | None = None,
        result: str | None = None,
    ) -> None:
        """One tool call: ``decision`` allowed or refused; ``arguments`` and ``result`` are kept
        only with content on."""
        payload: dict[str, Any] = {"decision": decision, "result_bytes": result_bytes}
        if self.content:
            payload["arguments"] = _cut(json.dumps(arguments, ensure_ascii=False, default=str))
            payload["result"] = _cut(result or "")
        self._add("tool_call", name, payload, duration_ms=duration_ms, error_class=error_class)
        if self._call_spans:
            self._annotate(
                {
                    "gen_ai.tool.name": name,
                    "talon.decision": decision,
                    "talon.result_bytes": result_bytes,
                    "talon.duration_ms": round(duration_ms, 3),
                    "talon.tool.arguments": otel.content(
                        json.dumps(arguments, ensure_ascii=False, default=str)
                    )
                    if otel.content_on()
                    else None,
                    "talon.tool.result": otel.content(result),
                },
                error_class,
            )

    def phase(self, name: str, error_class: str | None = None, **payload: Any) -> None:
        """A phase of the run: ``turn_started``, ``turn_ended`` (``outcome=...``), ..."""
        self._add("phase", name, payload, error_class=error_class)
        if name == "turn_ended" and self._run_span.is_recording():
            outcome = payload.get("outcome")
            otel.set_attributes(self._run_span, {"talon.outcome": outcome, **self._totals})
            if error_class is not None and outcome != "completed":
                otel.failed(self._run_span, error_class)

    def budget(self, limit: BudgetLimit, used: dict[str, float | int]) -> None:
        """A budget ran out and the run winds down."""
        self._add("budget", limit.name, {"limit": limit.limit, "used": used})

    def child_started(self, child_run_id: int | None, *, name: str, mode: str = "foreground") -> None:
        """A child agent (``name``: its agent type or persona) started as ``child_run_id``."""
        self._add("child", name, {"event": "started", "child_run_id": child_run_id, "mode": mode})

    def child_ended(
        self,
        child_run_id: int | None,
        *,
        name: str,
        status: str,
        input_tokens: int = 0,
        output_tokens: int = 0,
        duration_ms: float | None = None,
        error_class: str | None = None,
    ) -> None:
        """The child ``child_run_id`` ended with ``status`` (completed, failed, canceled...)."""
        payload = {
            "event": "ended",
            "child_run_id": child_run_id,
            "status": status,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
        }
        self._add("child", name, payload, duration_ms=duration_ms, error_class=error_class)

    def child_trace(self, child_run_id: int, *, persona: str, thread_id: int | None) -> RunTrace:
        """The trace of a child run: same content setting, this run's root as its root, and
        this trace's buffer, so it is written with the parent unless flushed first."""
        child = RunTrace(
            child_run_id,
            persona=persona,
            thread_id=thread_id,
            root_run_id=self.root_run_id if self.root_run_id is not None else self.run_id,
            content=self.content,
            retention_days=self.retention_days,
            clock=self._clock,
        )
        child._events = self._events
        return child

    def _annotate(self, attributes: dict[str, Any], error_class: str | None) -> None:
        target = self._call_spans[-1]
        otel.set_attributes(target, attributes)
        if error_class is not None:
            otel.failed(target, error_class)

    def _add(
        self,
        kind: str,
        name: str | None,
        payload: dict[str, Any],
        *,
        duration_ms: float | None = None,
        error_class: str | None = None,
    ) -> None:
        if self._seq >= MAX_EVENTS:
            self._dropped += 1
            return
        self._events.append(self._event(kind, name, payload, duration_ms, error_class))

    def _event(
        self,
        kind: str,
        name: str | None,
        payload: dict[str, Any],
        duration_ms: float | None = None,
        error_class: str | None = None,
    ) -> TraceEvent:
        self._seq += 1
        return TraceEvent(
            self.run_id,
            self.root_run_id,
            self.thread_id,
            self.persona,
            self._seq,
            kind,
            name,
            self._clock(),
            None if duration_ms is None else round(duration_ms, 3),
            error_class,
            json.dumps(payload, ensure_ascii=False, default=str),
        )

    # ------------------------------------------------------------ writing

    def buffered(self) -> list[EventRow]:
        """This run's events recorded and not yet written: the current run's trace so far."""
        return [
            EventRow(
                0,
                e.run_id,
                e.root_run_id,
                e.seq,
                e.kind,
                e.name,
                e.at,
                e.duration_ms,
                e.error_class,
                json.loads(e.payload),
            )
            for e in self._events
            if e.run_id == self.run_id
        ]

    @property
    def pending(self) -> int:
        """Events buffered and not yet written."""
        return len(self._events)

    def write(self, conn: sqlite3.Connection) -> int:
        """Write the buffered events inside the caller's transaction (and sweep old ones);
        returns how many were written."""
        events = list(self._events)
        self._events.clear()
        if self._dropped:  # the one event past the cap: how many were left out
            events.append(self._event("phase", "events_dropped", {"count": self._dropped}))
            self._dropped = 0
        if self.retention_days is not None and next(_writes) % PURGE_EVERY == 0:
            cutoff = self._clock() - self.retention_days * 86_400
            purge_before(conn, cutoff, batch=PURGE_PER_WRITE * PURGE_EVERY)
        return add_events(conn, events) if events else 0

    async def flush(self, db: Database) -> int:
        """Write the buffered events in a transaction of their own (a run outliving its turn)."""
        if not self._events and not self._dropped:
            return 0
        return await db.run_transaction(self.write)


class NullTrace(RunTrace):
    """Records nothing: the default where no trace is kept."""

    def __init__(self) -> None:
        super().__init__(0, persona="", thread_id=None)

    def _add(self, *args: Any, **kwargs: Any) -> None:
        return None

    @contextlib.contextmanager
    def span(self, kind: str, name: str) -> Iterator[None]:
        yield

    def child_trace(self, child_run_id: int, *, persona: str, thread_id: int | None) -> RunTrace:
        return self


NULL_TRACE = NullTrace()


def _cut(text: str) -> str:
    return text if len(text) <= CONTENT_CHARS else text[:CONTENT_CHARS] + f"… [{len(text)} chars]"
