"""Pending interactions at run time: post a question or approval request, wait for its answer
without holding a worker slot, and take the answer from a tap or a reply.

:meth:`Interactions.ask` is called from inside a turn (a tool call). It records the interaction
(or finds the one this tool call recorded before a restart), posts it (buttons where the
connector has them, numbered choices otherwise), then waits under ``park()`` until the answer
or the timeout; nobody answering in time expires it (fail closed for approvals). The turn's
time limit does not run while it waits (:func:`gateway.interactions.clock.waiting`).

:meth:`Interactions.take` sits in front of the pipeline: a tap (``event.tap``) or a reply that
answers a question pending in its chat is committed here, deduplicated by the event id in the
same transaction, and never starts a turn. The prompt's buttons are then removed.

In a cluster the tap or reply may arrive on another node than the one whose turn waits: each
node hears of every interaction asked or closed elsewhere (:meth:`Interactions.heard`, from a
``LISTEN``), so the waiting turn wakes at once and a reply is read as an answer on any node;
:meth:`Interactions.sweep`, every heartbeat, makes up for a notification that was lost.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import sqlite3
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from connectors.base import (
    Connector,
    ErrorClass,
    InboundEvent,
    IntakeResult,
    IntakeStatus,
    SendResult,
    ThreadKey,
)
from connectors.interactive import InteractiveConnector, Prompt, ToggleConnector, numbered_text
from gateway.commands import command_of
from gateway.interactions.clock import waiting
from gateway.store.db import Database
from gateway.store.interactions import (
    InteractionRow,
    NewInteraction,
    answer_interaction,
    claim_post,
    create_interaction,
    expire_interaction,
    get_interaction,
    pending_interactions,
    set_platform_message,
    set_post_unknown,
    settle_interrupted_posts,
    toggle_selection,
)
from gateway.store.messages import record_event
from gateway.store.threads import get_thread

__all__ = ["Asked", "Interactions", "Reading"]

log = logging.getLogger("talon.interactions")

ID_BYTES = 6  # 8 url-safe characters: short enough for any platform's callback data
TEXT_ON_CONSOLE = "console"

Notice = Callable[[int, str], Any]
Park = Callable[[], AbstractContextManager[None]]


@dataclass(frozen=True, slots=True)
class Reading:
    """How an interaction kind reads answers: from option ids, from a reply's text, and in words."""

    from_options: Callable[[dict[str, Any], tuple[str, ...]], Any]
    from_text: Callable[[dict[str, Any], str], tuple[Any, str | None]]
    summary: Callable[[Any], str]
    prompt: Callable[[str, dict[str, Any]], Prompt] | None = None  # (prompt id, spec) -> the prompt


@dataclass(frozen=True, slots=True)
class Asked:
    """What to ask: the spec stored with it and the prompt shown."""

    kind: str  # question | approval
    spec: dict[str, Any]
    prompt: Callable[[str], Prompt]  # prompt id -> the prompt
    answerers: tuple[str, ...] | None  # None: anyone in the chat
    timeout: float


class Interactions:
    """Args:
    db: the daemon's database.
    connectors: the channels by name.
    notice: posts a text into a thread through the outbox (for surfaces without buttons).
    park: releases the turn's worker slot while it waits (``TurnQueue.parked``).
    readings: how each kind reads its answers.
    node: this node's id in a cluster (None: the only node).
    """

    def __init__(
        self,
        db: Database,
        connectors: Mapping[str, Connector],
        *,
        notice: Notice,
        park: Park | None = None,
        readings: Mapping[str, Reading],
        node: str | None = None,
    ):
        self.db = db
        self.connectors = connectors
        self.notice = notice
        self.park = park or nullcontext
        self.readings = readings
        self.node = node
        self._waiters: dict[str, asyncio.Future[InteractionRow]] = {}
        self._open: dict[ThreadKey, dict[str, InteractionRow]] = {}  # pending, by chat, oldest first
        self._keys: dict[int, ThreadKey] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._learning: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Learn which chats have interactions pending (from before a restart). A prompt whose
        posting a crash interrupted may or may not be in the chat: it is never posted again."""
        for interaction_id in await self.db.run_transaction(settle_interrupted_posts, self.node):
            log.warning(
                "the prompt of interaction %s may or may not have been posted before a crash; "
                "not posting it again",
                interaction_id,
            )
        for row in await self.db.read(pending_interactions):
            key = await self._key(row.thread_id)
            if key is not None:
                self._open.setdefault(key, {})[row.id] = row

    # ------------------------------------------------------------ other nodes

    def heard(self, interaction_id: str) -> None:
        """Another node of the cluster asked or closed ``interaction_id``."""
        task = asyncio.create_task(self._refresh(interaction_id))
        self._learning.add(task)
        task.add_done_callback(self._learning.discard)

    async def sweep(self) -> None:
        """Catch up with every interaction asked or closed on other nodes (a notification may
        have been lost while the listener reconnected)."""
        pending = await self.db.read(pending_interactions)
        for row in pending:
            await self._learn(row)
        current = {row.id for row in pending}
        known = {i for rows in self._open.values() for i in rows} | set(self._waiters)
        for interaction_id in known - current:  # closed, or asked since the read: read it again
            await self._refresh(interaction_id)

    async def _refresh(self, interaction_id: str) -> None:
        try:
            row = await self.db.read(get_interaction, interaction_id)
        except sqlite3.Error as exc:  # the sweep reads it again
            log.warning("could not read interaction %s: %s", interaction_id, exc)
            return
        if row is not None:
            await self._learn(row)

    async def _learn(self, row: InteractionRow) -> None:
        """Keep ``row`` among its chat's open interactions while it is pending; once closed,
        drop it and wake the turn waiting for it here."""
        key = await self._key(row.thread_id)
        if key is None:
            return
        if row.state == "pending":
            self._open.setdefault(key, {}).setdefault(row.id, row)
            return
        self._open.get(key, {}).pop(row.id, None)
        waiter = self._waiters.get(row.id)
        if waiter is not None and not waiter.done():
            waiter.set_result(row)

    # ------------------------------------------------------------ asking

    async def ask(
        self, thread_id: int, run_id: int | None, call_id: str | None, asked: Asked
    ) -> InteractionRow:
        """Post ``asked`` and wait for its answer; the row as it ended (answered or expired)."""
        key = await self._key(thread_id)
        if key is None:
            raise LookupError(f"thread {thread_id} vanished")
        new = NewInteraction(
            id=secrets.token_urlsafe(ID_BYTES),
            thread_id=thread_id,
            run_id=run_id,
            call_id=call_id,
            kind=asked.kind,
            spec=asked.spec,
            answerers=asked.answerers,
            expires_at=time.time() + asked.timeout,
        )
        row, _ = await self.db.run_transaction(create_interaction, new, time.time())
        if row.state != "pending":
            return row
        waiter = self._waiters.setdefault(row.id, asyncio.get_running_loop().create_future())
        self._open.setdefault(key, {})[row.id] = row
        try:
            current = await self.db.read(get_interaction, row.id)
            if current is not None and current.state != "pending":
                return current  # answered while this run was not waiting (after a restart)
            if await self.db.run_transaction(claim_post, row.id):
                await self._post(key, row, asked.prompt(row.id))
            with self.park(), waiting():
                try:
                    async with asyncio.timeout(max(0.0, row.expires_at - time.time())):
                        return await asyncio.shield(waiter)
                except TimeoutError:
                    return await self._expire(key, row)
        finally:
            self._waiters.pop(row.id, None)
            self._open.get(key, {}).pop(row.id, None)

    async def _post(self, key: ThreadKey, row: InteractionRow, prompt: Prompt) -> None:
        """Post the prompt once: it was claimed (``sending``, committed) before this call, so a
        crash before its message id is recorded leaves it ``unknown``, never posted twice."""
        connector = self.connectors.get(key.channel)
        if isinstance(connector, InteractiveConnector):
            try:
                result = await connector.send_prompt(key, prompt)
            except Exception as exc:  # a connector bug says nothing about what the platform got
                log.error("send_prompt raised %s", type(exc).__name__, exc_info=exc)
                result = SendResult.failed(ErrorClass.AMBIGUOUS, type(exc).__name__)
            if result.ok and result.platform_message_id:
                await self.db.run_transaction(set_platform_message, row.id, result.platform_message_id)
                return
            if result.error_class is ErrorClass.AMBIGUOUS:
                await self.db.run_transaction(set_post_unknown, row.id)
                log.warning(
                    "the prompt may or may not have been posted (%s); not posting it again",
                    result.error,
                    extra={"thread_id": row.thread_id},
                )
                return
            log.warning(
                "could not post the prompt with buttons (%s); posting it as text",
                result.error,
                extra={"thread_id": row.thread_id},
            )
        ids = await self.notice(row.thread_id, numbered_text(prompt))
        marker = f"outbox:{ids[0]}" if ids else "text"
        await self.db.run_transaction(set_platform_message, row.id, marker)

    async def _expire(self, key: ThreadKey, row: InteractionRow) -> InteractionRow:
        now = time.time()
        expired = await self.db.run_transaction(expire_interaction, row.id, now)
        current = await self.db.read(get_interaction, row.id)
        assert current is not None
        if expired:
            log.info("interaction %s expired unanswered", row.id, extra={"thread_id": row.thread_id})
            self._close(key, current, "⌛ No answer in time.")
        return current

    # ------------------------------------------------------------ answers

    def wants(self, event: InboundEvent) -> bool:
        """Whether :meth:`take` handles this event (a tap, or a reply in a chat with a question open)."""
        if event.tap is not None:
            return True
        return (
            bool(self._open.get(event.thread_key)) and not command_of(event.text) and not event.sender.is_bot
        )

    async def take(self, event: InboundEvent) -> IntakeResult | None:
        """Commit a tap or reply that answers an interaction; None when the reply answers
        nothing (it then goes through the pipeline as a message)."""
        if event.tap is not None:
            row = await self.db.read(get_interaction, event.tap.prompt_id)
            if row is None:
                return await self._toast(event, "This button is no longer valid.")
            if event.tap.action == "toggle":
                return await self._toggle(event, row, event.tap.values[0])
            if event.tap.action == "submit":
                if not row.selection and row.state == "pending":
                    return await self._toast(event, "Pick at least one choice, then tap Submit.")
                values = row.selection
            else:
                values = event.tap.values
            return await self._answer(event, row, self.readings[row.kind].from_options(row.spec, values))
        for row in reversed(list(self._open.get(event.thread_key, {}).values())):
            if not _may_answer(row, event.sender.id):
                continue
            if self.node is not None:  # another node may have closed it a moment ago
                fresh = await self.db.read(get_interaction, row.id)
                if fresh is None or fresh.state != "pending":
                    self._open.get(event.thread_key, {}).pop(row.id, None)
                    continue
                row = fresh
            answer, problem = self.readings[row.kind].from_text(row.spec, event.text)
            if answer is None:
                return await self._toast(
                    event, problem or "That does not answer the question.", post=row.thread_id
                )
            return await self._answer(event, row, answer)
        return None

    async def _answer(self, event: InboundEvent, row: InteractionRow, answer: Any) -> IntakeResult:
        refusal = _refusal(row, event.sender.id)
        if refusal:
            return await self._toast(event, refusal)
        if answer is None:
            return await self._toast(event, "That is not one of the options.")

        def commit(conn: sqlite3.Connection) -> bool | None:
            if not record_event(conn, event.channel, event.event_id, "answer", time.time()):
                return None
            return answer_interaction(conn, row.id, answer, event.sender.id, time.time())

        done = await self.db.run_transaction(commit)
        if done is None:
            return IntakeResult(IntakeStatus.DUPLICATE, row.thread_id, reply="Already answered.")
        current = await self.db.read(get_interaction, row.id)
        assert current is not None
        if not done:
            return IntakeResult(IntakeStatus.STORED, row.thread_id, reply=_closed_words(current))
        log.info("interaction %s answered", row.id, extra={"thread_id": row.thread_id})
        waiter = self._waiters.get(row.id)
        if waiter is not None and not waiter.done():
            waiter.set_result(current)
        key = event.thread_key
        self._open.get(key, {}).pop(row.id, None)
        summary = self.readings[row.kind].summary(answer)
        who = event.sender.display_name or event.sender.id
        tapped = event.platform_message_id if event.tap is not None else None
        self._close(key, current, f"✅ {summary} — {who}", message_id=tapped)
        return IntakeResult(IntakeStatus.STORED, row.thread_id, reply=f"Got it: {summary}")

    async def _toggle(self, event: InboundEvent, row: InteractionRow, option_id: str) -> IntakeResult:
        """Flip one choice of a multi-choice prompt shown as toggle buttons; the selection is
        committed (it survives a restart) and the buttons redrawn before the tap is answered."""
        make = self.readings[row.kind].prompt
        prompt = make(row.id, row.spec) if make is not None else None
        choices = [o for o in prompt.options if o.id != "skip"] if prompt is not None and prompt.multi else []
        if option_id not in {o.id for o in choices}:
            return await self._toast(event, "That is not one of the options.")
        refusal = _refusal(row, event.sender.id)
        if refusal:
            return await self._toast(event, refusal)
        order = [o.id for o in choices]

        def commit(conn: sqlite3.Connection) -> tuple[str, ...] | bool | None:
            if not record_event(conn, event.channel, event.event_id, "toggle", time.time()):
                return False
            return toggle_selection(conn, row.id, option_id, order)

        selection = await self.db.run_transaction(commit)
        if selection is False:
            return IntakeResult(IntakeStatus.DUPLICATE, row.thread_id)
        if selection is None:
            current = await self.db.read(get_interaction, row.id)
            return IntakeResult(IntakeStatus.STORED, row.thread_id, reply=_closed_words(current or row))
        assert prompt is not None and isinstance(selection, tuple)
        connector = self.connectors.get(event.thread_key.channel)
        message_id = row.platform_message_id or event.platform_message_id
        if isinstance(connector, ToggleConnector) and message_id and ":" not in message_id:
            shown = dataclasses.replace(prompt, selected=frozenset(selection))
            await connector.show_selection(event.thread_key, message_id, shown)
        labels = [o.label for o in choices if o.id in selection]
        return IntakeResult(
            IntakeStatus.STORED,
            row.thread_id,
            reply=f"Selected: {', '.join(labels)}" if labels else "Nothing selected",
        )

    async def _toast(self, event: InboundEvent, text: str, *, post: int | None = None) -> IntakeResult:
        """Refuse a tap or reply: the tap's answer says why (a reply gets a notice in the chat);
        the event is recorded so a redelivery is recognised."""
        fresh = await self.db.run_transaction(
            lambda conn: record_event(conn, event.channel, event.event_id, "refused_answer", time.time())
        )
        if not fresh:
            return IntakeResult(IntakeStatus.DUPLICATE, reply=text)
        if event.tap is None and post is not None:  # a reply: the chat is told what to send instead
            await self.notice(post, text)
        return IntakeResult(IntakeStatus.STORED, post, reply=text)

    # ------------------------------------------------------------ closing prompts

    def _close(
        self, key: ThreadKey, row: InteractionRow, text: str, *, message_id: str | None = None
    ) -> None:
        """Remove the prompt's buttons (in the background: a tap is answered first). A prompt
        whose message id is unknown (a crash while it was posted) is closed where it was tapped."""
        connector = self.connectors.get(key.channel)
        message_id = row.platform_message_id or message_id
        if not isinstance(connector, InteractiveConnector) or not message_id or ":" in message_id:
            return
        if message_id == "text":
            return
        prompt_text = _prompt_text(row)
        task = asyncio.create_task(connector.close_prompt(key, message_id, f"{prompt_text}\n\n{text}"))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def settle(self) -> None:
        """Wait for prompts being closed and other nodes' news being read (tests, shutdown)."""
        if self._closing or self._learning:
            await asyncio.gather(*self._closing, *self._learning, return_exceptions=True)

    async def _key(self, thread_id: int) -> ThreadKey | None:
        key = self._keys.get(thread_id)
        if key is None:
            thread = await self.db.read(get_thread, thread_id)
            if thread is None:
                return None
            key = self._keys[thread_id] = thread.key
        return key


def _refusal(row: InteractionRow, sender_id: str) -> str | None:
    """Why ``sender_id`` may not answer ``row`` now; None when they may."""
    if row.state != "pending":
        return _closed_words(row)
    if not _may_answer(row, sender_id):
        return "Only the person it was asked of may answer this."
    if row.expires_at <= time.time():
        return "This question has expired."
    return None


def _may_answer(row: InteractionRow, sender_id: str) -> bool:
    return row.answerers is None or sender_id in row.answerers


def _closed_words(row: InteractionRow) -> str:
    return "Already answered." if row.state == "answered" else "This question has expired."


def _prompt_text(row: InteractionRow) -> str:
    spec = row.spec
    text = spec.get("question") or spec.get("title") or ""
    return f"❓ {text}" if row.kind == "question" else str(text)
