"""One agent turn for a leased batch: context -> model loop -> reply committed to the outbox.

The reply, the assistant message, the run's usage and the completion of the queue items
are written in one transaction, so a crash either leaves the batch to run again or has
the reply safely in the outbox — never both, never neither. When that transaction fails
after the model answered, the answer is kept on the run (``runs.answer``) and the retry
commits it without calling the model again.

The stages live beside it: :mod:`gateway.turn_start` (what the lease's transaction reads),
:mod:`gateway.turn_input` (what the model reads), :mod:`gateway.turn_commit` (the
transactions that end the turn); this module runs them in order around the model loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from connectors.base import Connector, ThreadKey
from gateway import otel
from gateway.budgets import RunBudget
from gateway.config import Settings
from gateway.events import EventBus
from gateway.interactions.clock import turn_deadline
from gateway.live_reply import LiveReply, Preview, open_live_reply, settle_stale, stale_preview_of
from gateway.logs import log_retried, run_id_var, thread_id_var
from gateway.metrics import TOKENS, TURN_COST
from gateway.outbox import Outbox, ThreadAddress
from gateway.personas import Persona
from gateway.poster import ChannelPoster
from gateway.queue import Batch, ReplyNotSavedError, TurnHandler, complete_in
from gateway.roles import as_role, batch_role
from gateway.runtime.agent import TurnResult, run_agent
from gateway.runtime.checkpoints import Checkpoint, Suspended
from gateway.runtime.context import ChannelInfo
from gateway.runtime.fallback import chain_for
from gateway.runtime.model import ModelProvider
from gateway.spending import BudgetState, Spending
from gateway.store.db import Database
from gateway.store.runs import end_run
from gateway.store.threads import ThreadRow, get_thread
from gateway.subagents.summarize import Summarizer
from gateway.tracing import RunTrace
from gateway.turn_checkpoints import TurnCheckpoints
from gateway.turn_commit import (
    Reply,
    commit_refusal,
    commit_reply,
    keep_answer_of,
    not_saved_reason,
    storable,
)
from gateway.turn_input import turn_input
from gateway.turn_notices import STOPPED, failure_notice
from gateway.turn_seams import NoTurnTools, ScheduleResults, TurnHooks, TurnTools
from gateway.turn_start import TurnStart, begin_turn
from gateway.usage import cost_of
from gateway.voice.service import Voice

log = logging.getLogger("talon.turns")


def _count_spend(settings: Settings, persona: Persona, result: TurnResult) -> None:
    """A committed turn's tokens and cost in the metrics, under the model that answered."""
    model = result.model or persona.model_ref
    TOKENS.labels(persona.name, model, "input").inc(result.usage.input_tokens)
    TOKENS.labels(persona.name, model, "output").inc(result.usage.output_tokens)
    cost = cost_of(result.usage, settings.prices.get(model))
    if cost:
        TURN_COST.labels(persona.name, model).inc(cost)


class TurnRunner(TurnHandler):
    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        personas: Mapping[str, Persona],
        providers: Mapping[str, ModelProvider],
        connectors: Mapping[str, Connector],
        outbox: Outbox,
        poster: ChannelPoster,
        bus: EventBus,
        tools: TurnTools | None = None,
        schedule_results: ScheduleResults | None = None,
        hooks: Sequence[TurnHooks] = (),
        summarizer: Summarizer | None = None,
        voice: Voice | None = None,
    ):
        self.db = db
        self.settings = settings
        self.personas = personas
        self.providers = providers
        self.connectors = connectors
        self.outbox = outbox
        self.poster = poster
        self.bus = bus
        self.tools = tools or NoTurnTools()
        self.schedule_results = schedule_results
        self.checkpoints = TurnCheckpoints(db)
        self.hooks = [*hooks, self.checkpoints]  # the last: a turn's checkpoints go when it is over
        self.summarizer = summarizer
        self.voice = voice
        self.spending = Spending(db, settings, poster.notify)
        self._channels = [ChannelInfo(c.name, c.type, c.home_chat) for c in settings.channels]
        self._traces: dict[int, RunTrace] = {}  # running turns' traces, written when they end

    async def _thread(self, thread_id: int) -> ThreadRow:
        row = await self.db.read(get_thread, thread_id)
        if row is None:
            raise LookupError(f"thread {thread_id} vanished")
        return row

    def begin(self, conn: sqlite3.Connection, batch: Batch) -> TurnStart:
        """The turn's context and its ``runs`` row, in the lease's transaction."""
        return begin_turn(conn, batch, self.personas)

    async def run(self, batch: Batch, begun: TurnStart) -> None:
        if not otel.enabled() or begun.persona is None or begun.run_id is None:
            return await self._run(batch, begun)
        parents = begun.trace_parents
        attributes = {
            "talon.run_id": begun.run_id,
            "talon.thread_id": batch.thread_id,
            "talon.persona": begun.persona.name,
            "talon.channel": begun.thread.channel,
            "talon.messages": len(batch.message_ids),
            "talon.kept": begun.kept is not None,
        }
        with otel.span(
            "talon.turn", parent=parents[0] if parents else None, links=parents[1:], attributes=attributes
        ):
            await self._run(batch, begun)

    async def _run(self, batch: Batch, begun: TurnStart) -> None:
        thread, persona, run_id = begun.thread, begun.persona, begun.run_id
        if persona is None or run_id is None:
            log.error("thread %s is bound to unknown persona %r; skipping", batch.thread_id, thread.persona)
            await self.db.run_transaction(partial(complete_in, batch=batch, run_id=None))
            return
        timeout = self.settings.agent.turn_timeout
        for hook in self.hooks:
            persona, special = await hook.prepare(thread, persona)
            timeout = special or timeout
        persona = as_role(persona, batch_role(self.settings, thread.channel, begun.senders))
        key = thread.key
        thread_id_var.set(batch.thread_id)  # every log line of this turn carries the ids
        run_id_var.set(run_id)
        for hook in self.hooks:
            await hook.turn_started(thread, batch, run_id)
        self.bus.publish(
            batch.thread_id, {"type": "turn_started", "run_id": run_id, "messages": batch.message_ids}
        )
        if begun.kept is None:  # a kept answer was paid for already
            spent = await self.spending.check(*begun.budget_subjects(persona.name))
            if spent is not None:
                await self._refuse(batch, thread, run_id, spent, begun.reply_to)
                return
        if self.voice is not None:  # voice notes become text before the model reads them
            begun = replace(begun, rows=await self.voice.hear(thread, run_id, batch.message_ids, begun.rows))
        trace = self._traces[run_id] = RunTrace(
            run_id,
            persona=persona.name,
            thread_id=batch.thread_id,
            content=self.settings.traces.content,
            retention_days=self.settings.traces.retention_days,
        )
        trace.phase("turn_started", messages=len(batch.message_ids), kept=begun.kept is not None)
        # Previews an interrupted attempt left in the chat go before this attempt writes its own.
        stale = await settle_stale(
            self.db,
            self.connectors,
            batch.thread_id,
            partial(stale_preview_of, self.settings),
            begun.previews,
        )
        preview: Preview | None = None
        if begun.kept is not None:
            log.info("committing the answer kept from an earlier attempt; the model is not called again")
            result, context_size = begun.kept, 0
        else:
            result, context_size, preview = await self._answer(batch, begun, key, persona, run_id, timeout)
        try:
            outbox_ids, next_row = await self._commit(batch, begun, key, persona, run_id, result, preview)
        except Exception as exc:
            self._traces.pop(run_id, None)  # the attempt's trace went with its transaction
            raise await self._not_saved(batch, run_id, result, exc) from exc
        if preview is not None and not outbox_ids:  # a silent turn: nothing replaces its preview
            await settle_stale(self.db, self.connectors, batch.thread_id, lambda channel: "delete")
        elif stale:  # ones the channel could not settle before the turn (it was still starting)
            await settle_stale(
                self.db, self.connectors, batch.thread_id, partial(stale_preview_of, self.settings)
            )
        await self._announce(batch, thread, run_id, result, outbox_ids, next_row)
        await self.spending.after_turn(*begun.budget_subjects(persona.name))
        if self.summarizer is not None and context_size > self.summarizer.threshold:
            self.summarizer.schedule(batch.thread_id, persona)  # after the reply, off its path

    async def _answer(
        self, batch: Batch, begun: TurnStart, key: ThreadKey, persona: Persona, run_id: int, timeout: float
    ) -> tuple[TurnResult, int, Preview | None]:
        """The model loop within the turn's timeout, the chat showing the bot at work meanwhile
        (and the reply as it is written, where the chat streams)."""
        connector = self.connectors.get(key.channel)
        live = open_live_reply(
            settings=self.settings,
            db=self.db,
            connector=connector,
            key=key,
            chat_type=begun.thread.chat_type,
            thread_id=batch.thread_id,
            run_id=run_id,
            reply_to=begun.reply_to,
            labels=getattr(self.tools, "status_label", None),
            bus=self.bus,
        )
        if connector:
            await connector.set_working(key, True)
        try:
            async with asyncio.timeout(timeout) as deadline:
                with turn_deadline(deadline):  # it stands still while the turn waits for a human
                    result, size = await self._think(
                        batch,
                        begun.thread,
                        persona,
                        run_id,
                        begun.summary,
                        begun.rows,
                        begun.sender_id,
                        live,
                        resume=begun.resume,
                    )
            return result, size, (await live.close() if live is not None else None)
        except BaseException as exc:
            if live is not None:
                with contextlib.suppress(Exception):
                    await live.discard(stale_preview_of(self.settings, key.channel))
            await self._end_run(
                run_id, "canceled" if isinstance(exc, asyncio.CancelledError) else "failed", str(exc)
            )
            raise
        finally:
            self.tools.release(run_id)  # the run's host-tool secret stops working
            if connector:
                with contextlib.suppress(Exception):
                    await connector.set_working(key, False)

    async def _not_saved(
        self, batch: Batch, run_id: int, result: TurnResult, exc: Exception
    ) -> ReplyNotSavedError:
        """The reply's commit failed: keep the answer on the run, in a transaction of its own,
        so the retry commits it instead of paying for the model again."""
        error = storable(f"reply not saved: {type(exc).__name__}: {exc}")
        log_retried(log, exc, "the model answered but the reply could not be saved; keeping the answer")
        try:
            await self.db.run_transaction(
                partial(keep_answer_of, batch=batch, run_id=run_id, result=result, error=error)
            )
        except Exception:
            log.exception("the answer could not be kept either; the retry will call the model again")
        return ReplyNotSavedError(error, reason=not_saved_reason(exc))

    async def _end_run(self, run_id: int, status: str, error: str | None) -> None:
        trace = self._traces.pop(run_id, None)

        def end(conn: sqlite3.Connection) -> None:
            end_run(conn, run_id, status, error, time.time())
            if trace is not None:
                trace.phase("turn_ended", error_class=status, outcome=status)
                trace.write(conn)

        await self.db.run_transaction(end)

    async def _think(
        self,
        batch: Batch,
        thread: ThreadRow,
        persona: Persona,
        run_id: int,
        summary: str | None,
        rows: Any,
        sender_id: str | None = None,
        live: LiveReply | None = None,
        *,
        resume: Suspended | None = None,
    ) -> tuple[TurnResult, int]:
        """The turn's model loop; also returns the transcript's size in tokens."""
        given = await turn_input(
            self.db,
            self.settings,
            batch=batch,
            thread=thread,
            persona=persona,
            summary=summary,
            rows=rows,
            sender_id=sender_id,
            channels=self._channels,
            tool_instructions=self.tools.instructions(persona),
        )
        if not given.messages:
            return TurnResult(text=""), 0
        trace = self._traces[run_id]
        provider = chain_for(self.providers, persona.model_ref, persona.fallbacks, trace=trace)
        budget = RunBudget(persona.budgets)
        toolbox = self.tools.toolbox(
            persona,
            batch.thread_id,
            run_id,
            sender_id=sender_id,
            budget=budget,
            trace=trace,
            interactive=bool(batch.message_ids),
        )
        result = await run_agent(
            provider,
            model=persona.model,
            system=given.system,
            messages=given.messages,
            tools=live.tools(toolbox) if live is not None else toolbox,
            max_turns=persona.max_turns or self.settings.agent.max_turns,
            max_tokens=persona.max_tokens or self.settings.agent.max_tokens,
            call_timeout=self.settings.agent.turn_timeout,
            trace=trace,
            budget=budget,
            on_text=live.on_text if live is not None else None,
            checkpoint=self._checkpoint(batch, run_id, toolbox),
            resume=resume,
        )
        result.model, result.fallbacks = provider.answered, provider.fallbacks
        return result, given.tokens

    def _checkpoint(self, batch: Batch, run_id: int, toolbox: Any) -> Checkpoint | None:
        """Where the run's state goes before a call that may wait for a human: the store, with
        the batch pointed at this run, so that after a restart the run resumes there."""
        may_wait = getattr(toolbox, "may_wait", None)
        if not callable(may_wait):
            return None

        async def save(state: Suspended) -> None:
            await self.checkpoints.save(run_id, batch, state)

        return Checkpoint(may_wait, save)

    async def _commit(
        self,
        batch: Batch,
        begun: TurnStart,
        key: ThreadKey,
        persona: Persona,
        run_id: int,
        result: TurnResult,
        preview: Preview | None = None,
    ) -> tuple[list[int], sqlite3.Row | None]:
        """Render the reply and commit it with the batch's completion: its outbox rows and the
        thread's next outbox row, for the sender. A streamed preview is replaced by the reply's
        first chunk (an edit), committed with the preview marked final."""
        scheduled = [i for i in batch.items if i.kind == "schedule"]
        # A scheduled run that already posted with channel_send, or has nothing to say, sends nothing more.
        silent = not result.text or (scheduled and "channel_send" in result.tool_calls)
        connector = self.connectors.get(key.channel)
        chunks = connector.render(result.text) if (connector and not silent) else []
        spoken: list[Any] = []  # the reply's voice message, committed with it (gateway/voice/speaking.py)
        if self.voice is not None and connector is not None and chunks and not scheduled:
            plain = "".join(c.plain for c in chunks)
            spoken = await self.voice.spoken_reply(
                run_id, key.channel, plain, connector.max_file_bytes, persona.speech
            )
        trace = self._traces.pop(run_id, None)
        if trace is not None:
            trace.phase("turn_ended", outcome="completed", silent=bool(silent))
        reply = Reply(
            batch,
            ThreadAddress(batch.thread_id, key),
            persona,
            run_id,
            result,
            bool(silent),
            chunks,
            spoken,
            begun.reply_to,
            preview,
            trace,
            otel.traceparent(),  # the turn's span, which its sends continue
            sender=begun.sent_by.counted,
            payer=begun.payer,
        )
        try:
            committed = await self.db.run_keyed(
                ("thread", batch.thread_id), commit_reply, reply, self.settings
            )
        except BaseException:
            await self.outbox.spool.discard([f.path for f in spoken])
            raise
        _count_spend(self.settings, persona, result)
        return committed

    async def _announce(
        self,
        batch: Batch,
        thread: ThreadRow,
        run_id: int,
        result: TurnResult,
        outbox_ids: list[int],
        next_row: sqlite3.Row | None,
    ) -> None:
        """After the commit: hand the reply to its sender and tell whoever follows the turn."""
        if outbox_ids:
            self.outbox.notify(batch.thread_id, next_row)
        for item in batch.items:
            if item.kind == "schedule":
                await self._schedule_result(item.payload, status="completed", run_id=run_id, error=None)
        for hook in self.hooks:
            await hook.turn_ended(thread, batch, "completed", result.text, None)
        self.bus.publish(
            batch.thread_id,
            {
                "type": "turn_ended",
                "status": "completed",
                "run_id": run_id,
                "messages": batch.message_ids,
                "outbox": outbox_ids,
            },
        )

    async def _schedule_result(self, payload: dict[str, Any], **kwargs: Any) -> None:
        if self.schedule_results and "schedule_id" in payload:
            await self.schedule_results(payload["schedule_id"], payload.get("due_at", 0.0), **kwargs)

    async def _refuse(
        self, batch: Batch, thread: ThreadRow, run_id: int, spent: BudgetState, reply_to: str | None
    ) -> None:
        """A spent budget: no model call; the batch completes with the refusal posted (its
        messages stay stored) and the run ends ``refused``."""
        connector = self.connectors.get(thread.channel)
        text = spent.refusal(self.settings.currency)
        chunks = connector.render(text) if connector is not None else []
        refuse = partial(
            commit_refusal,
            batch=batch,
            address=ThreadAddress(batch.thread_id, thread.key),
            run_id=run_id,
            chunks=chunks,
            reply_to=reply_to,
            why=f"{spent.budget} for {spent.subject} is spent",
            span_parent=otel.traceparent(),
        )
        outbox_ids, next_row = await self.db.run_transaction(refuse)
        if outbox_ids:
            self.outbox.notify(batch.thread_id, next_row)
        error = f"budget {spent.budget} is spent"
        for item in batch.items:
            if item.kind == "schedule":
                await self._schedule_result(item.payload, status="failed", run_id=run_id, error=error)
        for hook in self.hooks:
            await hook.turn_ended(thread, batch, "failed", "", error)
        self.bus.publish(
            batch.thread_id,
            {
                "type": "turn_ended",
                "status": "refused",
                "run_id": run_id,
                "error": error,
                "messages": batch.message_ids,
                "outbox": outbox_ids,
            },
        )

    async def gave_up(
        self, batch: Batch, error: str, *, canceled: bool, failure: BaseException | None = None
    ) -> None:
        for item in batch.items:
            if item.kind == "schedule":
                await self._schedule_result(
                    item.payload, status="canceled" if canceled else "failed", run_id=None, error=error
                )
        posted: list[int] = []
        if batch.message_ids:
            posted = await self.poster.notice(
                batch.thread_id, STOPPED if canceled else failure_notice(failure)
            )
        thread = await self._thread(batch.thread_id)
        for hook in self.hooks:
            await hook.turn_ended(thread, batch, "canceled" if canceled else "failed", "", error)
        self.bus.publish(
            batch.thread_id,
            {
                "type": "turn_ended",
                "status": "canceled" if canceled else "failed",
                "error": error,
                "messages": batch.message_ids,
                "outbox": posted,
            },
        )
