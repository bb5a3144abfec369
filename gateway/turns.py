"""One agent turn for a leased batch: context -> model loop -> reply committed to the outbox.

The reply, the assistant message, the run's usage and the completion of the queue items
are written in one transaction, so a crash either leaves the batch to run again or has
the reply safely in the outbox — never both, never neither. When that transaction fails
after the model answered, the answer is kept on the run (``runs.answer``) and the retry
commits it without calling the model again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from connectors.base import Connector, ThreadKey
from gateway import otel
from gateway.budgets import RunBudget
from gateway.config import Settings
from gateway.events import EventBus
from gateway.interactions.clock import turn_deadline
from gateway.live_reply import (
    LiveReply,
    Preview,
    enqueue_reply,
    open_live_reply,
    settle_stale,
    stale_preview_of,
)
from gateway.logs import run_id_var, thread_id_var
from gateway.memory_scopes import hot_memory_section, memory_keys
from gateway.metrics import TOKENS, TURN_COST
from gateway.outbox import Outbox, ThreadAddress, enqueue_chunks, enqueue_files, next_pending
from gateway.personas import Persona
from gateway.poster import ChannelPoster
from gateway.queue import Batch, ReplyNotSavedError, TurnHandler, complete_in, keep_run_in
from gateway.roles import as_role, batch_role
from gateway.runtime.agent import TurnResult, run_agent
from gateway.runtime.checkpoints import Checkpoint, Suspended, from_state, to_state
from gateway.runtime.context import (
    ChannelInfo,
    build_transcript,
    estimate_tokens,
    system_prompt,
    transcript_rows,
)
from gateway.runtime.fallback import chain_for
from gateway.runtime.inbound_images import transcript_images
from gateway.runtime.model import ChatMessage, ModelProvider, Usage
from gateway.skills import skill_entries, skills_section
from gateway.spending import BudgetState, Spending, batch_sender, run_spend
from gateway.store.children import Payer, job_payer
from gateway.store.db import Database
from gateway.store.interactions import load_checkpoint, save_checkpoint
from gateway.store.memory import list_items
from gateway.store.messages import MessageRow, add_message, batch_senders, platform_message_id, sole_sender
from gateway.store.runs import KeptAnswer, complete_run, end_run, keep_answer, resume_kept, start_run
from gateway.store.threads import ThreadRow, get_thread
from gateway.subagents.summarize import Summarizer, context_start
from gateway.tracing import RunTrace
from gateway.turn_notices import STOPPED, failure_notice
from gateway.turn_seams import NoTurnTools, ScheduleResults, TurnHooks, TurnTools
from gateway.usage import cost_of
from gateway.voice.service import Voice
from gateway.workspaces import thread_workspace

log = logging.getLogger("talon.turns")


@dataclass(frozen=True, slots=True)
class TurnStart:
    """What :meth:`TurnRunner.begin` read and recorded in the lease's transaction."""

    thread: ThreadRow
    summary: str | None
    rows: list[MessageRow]
    persona: Persona | None  # None: the thread's persona is not configured (and no run began)
    run_id: int | None
    reply_to: str | None  # the platform message a group reply answers
    kept: TurnResult | None = None  # the answer an earlier attempt kept: commit it, don't ask the model
    sender_id: str | None = None  # the one sender the batch's messages are from, if one
    senders: tuple[str, ...] = ()  # every sender of the batch's messages (their roles narrow the turn)
    resume: Suspended | None = None  # where an earlier attempt was suspended, waiting for a human
    trace_parents: tuple[str, ...] = ()  # the spans this turn continues (its messages' intake)
    payer: Payer | None = None  # a background child's turn counts for its root turn's payer

    def budget_subjects(self, persona: str) -> tuple[str, str, tuple[str, ...]]:
        """The persona, channel and senders whose budgets this turn is checked and counted against."""
        if self.payer is None:
            return persona, self.thread.channel, self.senders
        return self.payer.persona or persona, self.payer.channel or "", self.payer.senders


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
        self.hooks = list(hooks)
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
        upto = max(batch.message_ids) if batch.message_ids else None
        thread, summary, rows = _load_context(batch.thread_id, upto, conn)
        persona = self.personas.get(thread.persona or "")
        if persona is None:
            return TurnStart(thread, summary, rows, None, run_id=None, reply_to=None)
        kept = _resume_kept(conn, batch.kept_run) if batch.kept_run is not None else None
        state = load_checkpoint(conn, batch.kept_run) if batch.kept_run is not None and kept is None else None
        if kept is not None or state is not None:
            run_id = batch.kept_run
        else:
            run_id = start_run(conn, batch.thread_id, persona.name, persona.model_ref, time.time())
        reply_to = None
        if upto is not None and thread.chat_type != "dm":  # in groups, reply to the trigger
            reply_to = platform_message_id(conn, upto)
        sender_id = sole_sender(conn, batch.message_ids)
        senders = tuple(batch_senders(conn, batch.message_ids))
        resume = from_state(state) if state is not None else None
        # A background child's turn has no messages' spans: it continues the span that started it.
        parents = otel.parents(conn, "message", batch.message_ids) or otel.parents(
            conn, "thread", [batch.thread_id]
        )
        return TurnStart(
            thread,
            summary,
            rows,
            persona,
            run_id,
            reply_to,
            kept,
            sender_id,
            senders,
            resume,
            tuple(parents),
            job_payer(conn, batch.thread_id),
        )

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
            self.db, self.connectors, batch.thread_id, partial(stale_preview_of, self.settings)
        )
        preview: Preview | None = None
        if begun.kept is not None:
            log.info("committing the answer kept from an earlier attempt; the model is not called again")
            result, context_size = begun.kept, 0
        else:
            result, context_size, preview = await self._answer(batch, begun, key, persona, run_id, timeout)
        try:
            outbox_ids, next_row = await self._commit(
                batch, key, persona, run_id, result, begun.reply_to, preview
            )
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
        error = _storable(f"reply not saved: {type(exc).__name__}: {exc}")
        log.error("the model answered but the reply could not be saved; keeping the answer", exc_info=exc)
        try:
            await self.db.run_transaction(
                partial(_keep_answer, batch=batch, run_id=run_id, result=result, error=error)
            )
        except Exception:
            log.exception("the answer could not be kept either; the retry will call the model again")
        return ReplyNotSavedError(error, reason=_not_saved_reason(exc))

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
        keys = memory_keys(
            persona.capabilities,
            persona=persona.name,
            thread_id=thread.id,
            channel=thread.channel,
            sender_id=sender_id,
        )
        memory = await self.db.read(hot_memory_section, list(keys.values())) if keys else None
        skills = None
        if "skill.use" in persona.capabilities:  # names and descriptions only, until skill loads one
            listed = list(zip(persona.skills, persona.skill_descriptions, strict=True))
            skills = skills_section(await self.db.read(skill_entries, persona.name, listed))
        system = system_prompt(
            persona,
            timezone=self.settings.timezone,
            channels=self._channels,
            current_channel=thread.channel,
            tool_instructions=self.tools.instructions(persona),
            summary=summary,
            memory=memory,
            skills=skills,
        )
        provider_settings = self.settings.providers.get(persona.provider)
        vision = provider_settings is not None and provider_settings.accepts_images(persona.model)
        workspace = thread_workspace(self.settings, persona.name, batch.thread_id)
        images = await asyncio.to_thread(transcript_images, rows, workspace, vision=vision)
        messages = build_transcript(
            rows,
            budget_tokens=self.settings.agent.context_tokens,
            show_names=thread.chat_type != "dm",
            images=images,
        )
        for item in batch.items:
            if item.kind != "message":
                messages.append(ChatMessage("user", _task_text(item.kind, item.payload)))
        context_size = sum(estimate_tokens(m.content) for m in messages)
        if not messages:
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
            system=system,
            messages=_alternate(messages),
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
        return result, context_size

    def _checkpoint(self, batch: Batch, run_id: int, toolbox: Any) -> Checkpoint | None:
        """Where the run's state goes before a call that may wait for a human: the store, with
        the batch pointed at this run, so that after a restart the run resumes there."""
        may_wait = getattr(toolbox, "may_wait", None)
        if not callable(may_wait):
            return None

        async def save(state: Suspended) -> None:
            await self.db.run_transaction(
                save_checkpoint, run_id, batch.thread_id, to_state(state), batch.ids, time.time()
            )

        return Checkpoint(may_wait, save)

    async def _commit(
        self,
        batch: Batch,
        key: ThreadKey,
        persona: Persona,
        run_id: int,
        result: TurnResult,
        reply_to: str | None,
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
        address = ThreadAddress(batch.thread_id, key)
        trace = self._traces.pop(run_id, None)
        if trace is not None:
            trace.phase("turn_ended", outcome="completed", silent=bool(silent))
        span_parent = otel.traceparent()  # the turn's span, which its sends continue

        def commit(conn: sqlite3.Connection) -> tuple[list[int], sqlite3.Row | None]:
            now = time.time()
            outbox_ids: list[int] = []
            otel.keep(conn, "run", run_id, span_parent)
            if not silent:
                message_id = add_message(
                    conn,
                    batch.thread_id,
                    "assistant",
                    result.text,
                    created_at=now,
                    persona=persona.name,
                    run_id=run_id,
                    sort_key=_after(batch),
                )
                outbox_ids, after = enqueue_reply(
                    conn,
                    address,
                    chunks,
                    preview,
                    run_id=run_id,
                    message_id=message_id,
                    reply_to=reply_to,
                    now=now,
                )
                enqueue_files(conn, address, spoken, run_id=run_id, message_id=message_id, first_seq=after)
            complete_in(conn, batch, run_id)
            complete_run(
                conn,
                run_id,
                # A hook may have changed the provider since the run began, a fallback the model.
                model=result.model or persona.model_ref,
                input_tokens=result.usage.input_tokens,
                output_tokens=result.usage.output_tokens,
                model_calls=result.model_calls,
                now=now,
                spend=run_spend(
                    self.settings,
                    result,
                    persona,
                    key.channel,
                    batch_sender(conn, batch),
                    now,
                    payer=job_payer(conn, batch.thread_id),
                ),
            )
            if trace is not None:
                trace.write(conn)
            return outbox_ids, next_pending(conn, batch.thread_id) if outbox_ids else None

        try:
            committed = await self.db.run_transaction(commit)
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
        address = ThreadAddress(batch.thread_id, thread.key)
        span_parent = otel.traceparent()

        def commit(conn: sqlite3.Connection) -> tuple[list[int], sqlite3.Row | None]:
            otel.keep(conn, "run", run_id, span_parent)
            ids = enqueue_chunks(conn, address, chunks, run_id=run_id, reply_to=reply_to) if chunks else []
            complete_in(conn, batch, run_id)
            end_run(conn, run_id, "refused", f"{spent.budget} for {spent.subject} is spent", time.time())
            return ids, next_pending(conn, batch.thread_id) if ids else None

        outbox_ids, next_row = await self.db.run_transaction(commit)
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


def _load_context(
    thread_id: int, upto_message_id: int | None, conn: sqlite3.Connection
) -> tuple[ThreadRow, str | None, list[MessageRow]]:
    """One snapshot for a turn: the thread, its latest summary, its recent messages."""
    thread = get_thread(conn, thread_id)
    if thread is None:
        raise LookupError(f"thread {thread_id} vanished")
    summary = list_items(conn, thread_id, limit=1, kind="summary")
    rows = transcript_rows(
        conn, thread_id, context_from=context_start(thread), upto_message_id=upto_message_id
    )
    return thread, summary[0].value if summary else None, rows


def _resume_kept(conn: sqlite3.Connection, run_id: int) -> TurnResult | None:
    """The answer ``run_id`` kept when its reply failed to commit; the run is running again."""
    kept = resume_kept(conn, run_id)
    if kept is None:
        return None
    return TurnResult(
        text=kept.text,
        usage=Usage(kept.input_tokens, kept.output_tokens),
        model_calls=kept.model_calls,
        tool_calls=kept.tool_calls,
    )


def _keep_answer(conn: sqlite3.Connection, batch: Batch, run_id: int, result: TurnResult, error: str) -> None:
    answer = KeptAnswer(
        result.text,
        result.tool_calls,
        result.usage.input_tokens,
        result.usage.output_tokens,
        result.model_calls,
    )
    keep_answer(conn, run_id, answer, error=error, now=time.time())
    keep_run_in(conn, batch, run_id)


def _not_saved_reason(exc: Exception) -> str:
    """What failed, in words for the chat (the log has the details)."""
    if isinstance(exc, sqlite3.Error):
        return "the database refused the write"
    if isinstance(exc, UnicodeError):
        return "its text could not be stored"
    return f"an internal error ({type(exc).__name__})"


def _storable(text: str) -> str:
    """``text`` safe to store: an error message may quote what could not be encoded."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _after(batch: Batch) -> float | None:
    """The reply's place in the conversation: right after the last message it answers."""
    return max(batch.message_ids) + 0.5 if batch.message_ids else None


def _task_text(kind: str, payload: dict[str, Any]) -> str:
    if kind == "schedule":
        label = f" «{payload['label']}»" if payload.get("label") else ""
        return f"[scheduled task{label}] {payload.get('prompt', '')}"
    return f"[{kind}] {payload.get('text') or payload.get('prompt') or ''}"


def _alternate(messages: list[ChatMessage]) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for m in messages:
        if out and out[-1].role == m.role:
            last = out[-1]
            out[-1] = ChatMessage(m.role, last.content + "\n\n" + m.content, images=last.images + m.images)
        else:
            out.append(m)
    return out
