"""How fast a chat's messages are answered: a per-sender and a per-chat message rate.

Nothing is dropped. A message within the rate is due at once; one over it is due when
the window has room again, and the messages that wait for the same moment in the same
thread are taken into one turn by the queue, so the model runs at most about the rate
however fast people write. Each message counts as it arrives; messages that join a
batch already waiting in their thread cost nothing more, since they add no model run.
A message that is due at once in a thread where others wait takes them along into its
turn, so one fast sender does not hold up the rest of a group.

The counts are kept in memory, per process: a restart forgets how fast anyone was
sending, so a sender may get up to one more window of prompt answers after it. That is
acceptable: the limit bounds cost, not correctness (messages already waiting keep their
``available_at`` in the database and the queue schedules them again at start), and a
restart is rare next to a window of a minute. Keeping the counts out of the database
keeps the intake path at one transaction per event.
"""

from __future__ import annotations

from collections import deque
from typing import Literal, NamedTuple

from connectors.base import ThreadKey
from gateway.config import RateLimitSettings

Reason = Literal["sender", "chat"]
# A thread as plain strings: tuples hash and compare in C, which the per-event path needs.
_Where = tuple[str, str, str | None]


class Pace(NamedTuple):
    """When one message's queue item becomes due: ``available_at``, or as soon as it is
    committed when that is earlier."""

    available_at: float
    deferred: bool = False  # due later than it arrived
    catch_up: bool = False  # due now while earlier messages of its thread wait: take them along
    reason: Reason | None = None  # which limit made it wait

    def due(self, now: float) -> float:
        return self.available_at if self.available_at > now else now


PROMPT = Pace(0.0)
"""Due as soon as it is committed."""
_PROMPT_CATCH_UP = Pace(0.0, catch_up=True)


class _Window:
    """One key's recent message times (a sliding-window log, oldest first, at most
    ``limit`` of them) and the turn it has waiting, if any."""

    __slots__ = ("limit", "times", "waiting_thread", "waiting_until", "window")

    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.window = window
        self.times: deque[float] = deque(maxlen=limit)
        self.waiting_thread: _Where | None = None
        self.waiting_until = 0.0

    def due(self, thread: _Where, now: float) -> float:
        """The earliest time one more message fits."""
        if len(self.times) < self.limit or (free := self.times[0] + self.window) <= now:
            return now
        if self.waiting_until > now and self.waiting_thread == thread:
            return min(free, self.waiting_until)  # join the waiting turn rather than wait for a slot
        return free

    def take(self, at: float, thread: _Where, now: float) -> None:
        """Count a message due at ``at``."""
        if at > now:
            if at == self.waiting_until and self.waiting_thread == thread:
                return  # one more message for a turn already counted
            self.waiting_thread, self.waiting_until = thread, at
        times = self.times
        if times and at < times[-1]:  # due before a turn waiting elsewhere: keep the log in order
            self.times = deque(sorted((*times, at))[-self.limit :], maxlen=self.limit)
        else:
            times.append(at)

    def idle(self, now: float) -> bool:
        return self.waiting_until <= now and (not self.times or self.times[-1] + self.window <= now)


class RateLimiter:
    """Decides when each message is due, and when a sender is told they are slowed."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, ...], _Window] = {}
        self._waiting: dict[_Where, float] = {}  # threads with deferred messages -> until
        self._noticed: dict[tuple[str, ...], float] = {}  # who was told -> until when not again
        self._swept = 0.0

    def pace(
        self, thread: ThreadKey, sender_id: str, in_group: bool, rate: RateLimitSettings, now: float
    ) -> Pace:
        """Count one message that wants a reply and return when it is due."""
        if now - self._swept >= 60.0:
            self._sweep(now)
        channel, chat = thread.channel, thread.chat_id
        where = (channel, chat, thread.topic)
        user = self._window(("u", channel, chat, sender_id), rate.per_user, rate) if in_group else None
        room = self._window(("c", channel, chat), rate.per_chat, rate)
        at, reason = now, None
        # The later of the two limits decides; the sender's wins a tie, as the likelier cause.
        if user is not None and (due := user.due(where, now)) > at:
            at, reason = due, "sender"
        if room is not None and (due := room.due(where, now)) > at:
            at, reason = due, "chat"
        if user is not None:
            user.take(at, where, now)
        if room is not None:
            room.take(at, where, now)
        if reason is None:
            return _PROMPT_CATCH_UP if self._waiting and self._waiting.pop(where, 0.0) > now else PROMPT
        self._waiting[where] = max(at, self._waiting.get(where, 0.0))
        return Pace(at, True, False, reason)

    def should_notify(self, who: tuple[str, ...], window: float, now: float) -> bool:
        """True once per ``window`` for ``who`` (a sender, or a whole chat)."""
        if self._noticed.get(who, 0.0) > now:
            return False
        self._noticed[who] = now + window
        return True

    def _window(self, key: tuple[str, ...], limit: int, rate: RateLimitSettings) -> _Window | None:
        """The key's window; None when its limit is off."""
        if not limit:
            return None
        window = self._windows.get(key)
        if window is None or window.limit != limit or window.window != rate.window:
            window = self._windows[key] = _Window(limit, rate.window)
        return window

    def _sweep(self, now: float) -> None:
        """Forget keys with nothing left in their window, so memory follows active chats."""
        self._swept = now
        self._windows = {k: w for k, w in self._windows.items() if not w.idle(now)}
        self._waiting = {k: t for k, t in self._waiting.items() if t > now}
        self._noticed = {k: t for k, t in self._noticed.items() if t > now}


def slow_down_notice(seconds: float, *, reason: Reason, sender_name: str | None) -> str:
    """What a slowed chat reads. ``sender_name`` addresses the sender in a group; None in a
    DM, where "you" is clear."""
    when = _about(seconds)
    if reason == "chat" and sender_name is not None:
        return f"Messages are arriving here faster than I can answer — I'll reply to them together in {when}."
    you = f"{sender_name}, you're" if sender_name else "You're"
    return f"{you} sending messages faster than I can answer — I'll reply to all of them together in {when}."


def _about(seconds: float) -> str:
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    return f"about {round(seconds / 60)} min"
