"""The connector contract: what every channel produces and accepts.

Connectors turn platform traffic into :class:`InboundEvent` objects keyed by a
:class:`ThreadKey`, hand them to the gateway's intake (and acknowledge the platform only
after the intake returns, which means the event is committed), and deliver rendered
chunks with :meth:`Connector.send` and files with :meth:`Connector.send_file`, classifying
failures into :class:`ErrorClass`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from gateway.errors import PlatformError

ChatType = Literal["dm", "group", "channel", "thread"]


@dataclass(frozen=True, slots=True)
class ThreadKey:
    """Where a conversation lives on a platform. Built only by connectors.

    ``topic`` is the Telegram forum topic, the Slack ``thread_ts`` or the Discord
    thread id; ``None`` when the chat itself is the thread.
    """

    channel: str
    chat_id: str
    topic: str | None = None

    def __str__(self) -> str:
        suffix = f"/{self.topic}" if self.topic else ""
        return f"{self.channel}:{self.chat_id}{suffix}"


@dataclass(frozen=True, slots=True)
class Sender:
    id: str
    display_name: str
    is_bot: bool = False


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file that came with an inbound message, already downloaded to ``path``."""

    name: str
    path: str
    mime_type: str | None = None
    size: int = 0
    excerpt: str | None = None  # a document's opening text, added at intake (gateway/intake_documents.py)


@dataclass(frozen=True, slots=True)
class Tap:
    """A user picked ``values`` (option ids; one for a button) on the prompt ``prompt_id``
    (:mod:`connectors.interactive`). ``action`` ``toggle`` flips one option of a multi-choice
    prompt shown as toggle buttons; ``submit`` answers with the options toggled on."""

    prompt_id: str
    values: tuple[str, ...]
    action: str = "pick"  # pick | toggle | submit


@dataclass(slots=True)
class InboundEvent:
    """One platform message, normalized.

    ``event_id`` must be stable across platform redeliveries (Telegram ``update_id``,
    Slack ``event_id``/message ts, Discord message id): the pipeline deduplicates on
    ``(channel, event_id)``.
    """

    channel: str
    event_id: str
    thread_key: ThreadKey
    chat_type: ChatType
    sender: Sender
    text: str
    mentions_bot: bool = False
    needs_reply: bool = True  # False: store for context only (a group message not addressed to the bot)
    reply_to: str | None = None
    attachments: tuple[Attachment, ...] = ()
    persona: str | None = None  # a persona the sender addressed explicitly (console --persona)
    native_command: bool = False  # a Slack slash or Discord app command: the connector shows the answer
    platform_message_id: str | None = None
    received_at: float = field(default_factory=time.time)
    raw: dict[str, Any] = field(default_factory=dict)
    album: str | None = None  # messages sent as one (a Telegram media group) share it: one turn answers them
    tap: Tap | None = None  # a button tap (connectors.interactive); event_id is the platform's callback id


class ErrorClass(StrEnum):
    """How a failed send must be treated by the outbox."""

    PERMANENT = "permanent"  # stop and record; retrying cannot help
    TRANSIENT = "transient"  # retry with backoff, honouring retry_after
    AMBIGUOUS = "ambiguous"  # the request may have landed; never resend blindly


@dataclass(frozen=True, slots=True)
class SendResult:
    ok: bool
    platform_message_id: str | None = None
    error_class: ErrorClass | None = None
    retry_after: float | None = None
    error: str | None = None

    @classmethod
    def sent(cls, platform_message_id: str | None) -> SendResult:
        return cls(ok=True, platform_message_id=platform_message_id)

    @classmethod
    def failed(cls, error_class: ErrorClass, error: str, retry_after: float | None = None) -> SendResult:
        return cls(ok=False, error_class=error_class, error=error, retry_after=retry_after)


@dataclass(frozen=True, slots=True)
class RenderedChunk:
    """One platform message worth of output, plus its plain-text twin for fallback.

    ``format`` names the markup of ``text``: ``"html"`` (Telegram), ``"mrkdwn"`` (Slack),
    ``"markdown"`` (Discord, console) or ``"plain"``.
    """

    text: str
    plain: str
    format: str


@dataclass(frozen=True, slots=True)
class OutboundChunk:
    """A chunk the outbox asks a connector to deliver.

    ``delivery_id`` is the outbox row id: unique per chunk, stable across retries.
    """

    delivery_id: int
    thread: ThreadKey
    chunk: RenderedChunk
    reply_to: str | None = None
    replaces: str | None = None
    """A streamed preview this chunk replaces, for an editor that replaces by sending
    (:attr:`connectors.streaming.MessageEditor.replaces_by_send`)."""


@dataclass(frozen=True, slots=True)
class OutboundFile:
    """A file the outbox asks a connector to upload, as its own platform message.

    ``path`` is the outbox's private copy (it does not change while the row is open);
    ``delivery_id`` is the outbox row id, unique per file and stable across retries.
    """

    delivery_id: int
    thread: ThreadKey
    path: str
    name: str
    size: int
    mime_type: str | None = None
    reply_to: str | None = None


class IntakeStatus(StrEnum):
    ACCEPTED = "accepted"  # committed and queued for a turn
    STORED = "stored"  # committed; no turn wanted (not addressed to the bot, command)
    DUPLICATE = "duplicate"  # seen before; nothing changed
    UNROUTED = "unrouted"  # committed, but no binding names a persona for it


@dataclass(frozen=True, slots=True)
class IntakeResult:
    status: IntakeStatus
    thread_id: int | None = None
    message_id: int | None = None
    reply: str | None = None  # a chat command's answer, for a connector that shows it natively


IntakeHandler = Callable[[InboundEvent], Awaitable[IntakeResult]]
"""Commits an event. A connector acknowledges the platform only after this returns."""


@dataclass(slots=True)
class ConnectorHealth:
    """A channel's state: ``starting``, ``retrying`` (its start failed; ``detail`` is the last
    error and ``retry_at`` the next attempt), ``connected``, ``reconnecting``, ``failed``
    (``detail`` says why; ``restartable`` when the platform library gave up on an error that
    a fresh start may cure) or ``stopped``."""

    state: Literal["starting", "retrying", "connected", "reconnecting", "failed", "stopped"] = "starting"
    detail: str = ""
    since: float = field(default_factory=time.time)
    retry_at: float | None = None
    restartable: bool = False
    reconnects: int = 0  # times the connection was lost and re-established (or tried) since start

    def set(
        self, state: str, detail: str = "", *, retry_at: float | None = None, restartable: bool = False
    ) -> None:
        if state != self.state or detail != self.detail:
            if state == "reconnecting" and self.state != "reconnecting":
                self.reconnects += 1
            self.state = state  # type: ignore[assignment]
            self.detail = detail
            self.since = time.time()
        self.retry_at = retry_at
        self.restartable = restartable


@runtime_checkable
class Connector(Protocol):
    """A channel: one configured platform account.

    This is everything the gateway reads from a connector; a connector class declares each
    member itself (it need not subclass this protocol).
    """

    name: str
    """The channel's ``name`` in talon.yaml: thread keys, bindings and the outbox use it."""

    health: ConnectorHealth
    """The connection state ``talon status`` shows; the daemon marks a channel that failed to start."""

    idempotent_send: bool
    """True when delivering the same chunk twice shows it once (the console drops a repeated
    delivery id). After a crash the outbox then resends a chunk that was in flight; otherwise
    it records the chunk as ``unknown`` rather than risk a duplicate."""

    max_file_bytes: int
    """The largest file :meth:`send_file` uploads (the channel's ``max_upload_bytes``); a
    larger attachment is refused before anything is queued."""

    async def start(self, intake: IntakeHandler) -> None:
        """Connect and begin delivering events to ``intake``. Returns once running;
        raises :class:`ConnectorStartError` when the channel cannot start (bad token)."""

    async def stop(self) -> None:
        """Stop intake and close connections. Idempotent."""

    def render(self, markdown: str) -> list[RenderedChunk]:
        """Markdown -> platform chunks within the platform's limits."""

    async def send(self, item: OutboundChunk) -> SendResult:
        """Deliver one chunk. Never raises for platform errors: classify them."""

    async def send_file(self, item: OutboundFile) -> SendResult:
        """Upload one file as its own message. Never raises for platform errors: classify them."""

    async def set_working(self, thread: ThreadKey, working: bool) -> None:
        """Show or clear a typing/working indicator. Best effort; never raises."""


class ReceiveGate(Protocol):
    """What one receiver of a platform account waits on before it receives: in a cluster,
    that receiver's role, which one node holds at a time."""

    async def wait(self) -> None:
        """Return once this process may receive."""


ReceiveGates = Callable[[str], ReceiveGate]
"""A cluster node's gates for a channel's receivers, by receiver: ``""`` for a channel that
has one (a Telegram poller, an unsharded Discord bot), ``"shard-1-of-4"`` for one of a
Discord bot's shards."""


def single_receiver(connector: Connector) -> bool:
    """Whether each receiver of the channel should run in one process at a time: Telegram long
    polling refuses a second ``getUpdates`` caller, and a second Discord gateway session of a
    shard would receive its events again. Such a connector has ``receive_gates``
    (:data:`ReceiveGates` or None, set by a cluster node) and waits on its receivers' gates
    before receiving."""
    return bool(getattr(connector, "single_receiver", False))


class ConnectorStartError(PlatformError):
    """A channel could not start; the message says why and how to fix it.

    Args:
        message: Why, and how to fix it.
        transient: True when the same start may succeed later (the network is not up, the
            platform answered 5xx or refused the connection): the daemon tries again with
            backoff. False (a rejected token, a setting to change) leaves the channel failed.
    """

    def __init__(self, message: str, *, transient: bool = False):
        super().__init__(message)
        self.transient = transient
