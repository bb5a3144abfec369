"""What the fake Slack knows: its identities, the records tests inspect, and its state."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

BOT_TOKEN = "xoxb-1111-2222-fakebottoken"
APP_TOKEN = "xapp-1-A0FAKE001-3333-fakeapptoken"
SIGNING_SECRET = "fake-signing-secret-0123456789"
TEAM_ID = "T0FAKE001"
APP_ID = "A0FAKE001"
BOT_USER_ID = "U0FAKEBOT"
BOT_ID = "B0FAKEBOT"
BOT_NAME = "talon"
MAX_TEXT = 40_000


@dataclass
class PostedMessage:
    """A message the bot posted with ``chat.postMessage``."""

    channel: str
    ts: str
    text: str
    thread_ts: str | None
    mrkdwn: bool | None
    params: dict[str, Any]
    streaming: bool = False  # posted with chat.startStream and not stopped yet
    deleted: bool = False
    versions: list[str] = field(default_factory=list)  # the text before each chat.update
    edit_times: list[float] = field(default_factory=list)  # time.monotonic() of each chat.update
    stream_times: list[float] = field(default_factory=list)  # of chat.startStream and each append


@dataclass
class Envelope:
    """One event delivery; ``attempts`` counts how often it was sent, ``acked`` whether the
    app acknowledged it (an envelope ack in Socket Mode, a 200 over HTTP)."""

    envelope_id: str
    payload: dict[str, Any]
    kind: str = "events_api"
    attempts: int = 0
    acked: bool = False
    response: Any = None  # the ack's payload (Socket Mode) or response body (HTTP), when one came

    @property
    def event(self) -> dict[str, Any]:
        event = self.payload.get("event") if isinstance(self.payload, dict) else None
        return event if isinstance(event, dict) else {}


@dataclass
class Scripted:
    error: str | None
    status: int = 200
    retry_after: float | None = None
    delay: float = 0.0


@dataclass
class HostedFile:
    id: str
    name: str
    content: bytes
    mimetype: str


@dataclass
class User:
    id: str
    name: str
    real_name: str
    display_name: str
    is_bot: bool = False


@dataclass
class State:
    posted: defaultdict[str, list[PostedMessage]] = field(default_factory=lambda: defaultdict(list))
    reactions: defaultdict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    reaction_log: list[tuple[str, str, str, str]] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    call_times: list[float] = field(default_factory=list)  # time.time() of each entry in calls
    envelopes: list[Envelope] = field(default_factory=list)
    downloads: list[str] = field(default_factory=list)
    authors: dict[tuple[str, str], str] = field(default_factory=dict)
    statuses: list[tuple[str, str, str]] = field(default_factory=list)  # assistant.threads.setStatus


def channel_type(channel: str) -> str:
    return {"D": "im", "G": "group"}.get(channel[:1], "channel")
