"""Albums (several messages sent as one, such as a Telegram media group) become one turn.

Each message of an album is committed on its own as it arrives, deduplicated and acknowledged
like any other, so nothing here changes what is stored or when the platform is told. What
changes is when its queue item is due: every message of an album is due :data:`ALBUM_WINDOW`
seconds after the first one arrived, the same moment for all of them, so the queue, which
takes a thread's due messages into one batch, answers the album once with all its files.

In a group, the caption that addresses the bot is on one photo only; the album's other
photos, which would be stored for context alone, are answered with it once one of its
messages was accepted.

The first arrival of each album is kept in memory for :data:`FORGET_AFTER` seconds. Each
message also records its album, so a crash in the middle of an album does not split it: at
start the album's pending messages are held for :data:`RESTART_HOLD` seconds (:meth:`Albums.resume`;
the channels connect and the platform redelivers what was not acknowledged in that time), and
the rest of the album arriving meanwhile joins them; a message of an album
whose turn already ended is stored for context, not answered in a turn of its own
(the pipeline asks the store, :func:`gateway.store.messages.album_progress`).
"""

from __future__ import annotations

from gateway.intake_rate import Pace

__all__ = ["ALBUM_WINDOW", "FORGET_AFTER", "RESTART_HOLD", "Albums"]

ALBUM_WINDOW = 1.5
RESTART_HOLD = 10.0
FORGET_AFTER = 120.0
_Key = tuple[str, str, str]


class Albums:
    """The albums seen lately: when each began and whether one of its messages was accepted."""

    def __init__(self, window: float = ALBUM_WINDOW, restart_hold: float = RESTART_HOLD) -> None:
        self.window = window
        self.restart_hold = restart_hold
        self._first: dict[_Key, float] = {}
        self._accepted: set[_Key] = set()
        self._seen: dict[_Key, float] = {}

    def pace(self, key: _Key, pace: Pace, now: float) -> Pace:
        """``pace`` of an accepted album message, deferred to the album's common due time."""
        self._forget(now)
        first = self._first.setdefault(key, now)
        self._accepted.add(key)
        due = max(pace.available_at, first + self.window)
        return Pace(due, deferred=True, catch_up=pace.catch_up, reason=pace.reason if pace.deferred else None)

    def resume(self, key: _Key, now: float) -> float:
        """An album whose messages were pending at start: the rest of it joins them; returns
        when they are due."""
        self._first[key] = now + self.restart_hold - self.window
        self._accepted.add(key)
        return now + self.restart_hold

    def known(self, key: _Key, now: float) -> bool:
        """Whether a message of the album arrived lately (since the start)."""
        self._forget(now)
        return key in self._first or key in self._seen

    def answered(self, key: _Key, now: float) -> bool:
        """Whether an earlier message of the album was accepted (so this one joins its turn)."""
        self._forget(now)
        return key in self._accepted

    def seen(self, key: _Key, now: float) -> None:
        """A message of the album arrived (accepted or not)."""
        self._seen.setdefault(key, now)

    def _forget(self, now: float) -> None:
        for k in [k for k, t in self._seen.items() if now - t > FORGET_AFTER]:
            del self._seen[k]
        old = [k for k, t in self._first.items() if now - t > FORGET_AFTER]
        for k in old:
            del self._first[k]
            self._accepted.discard(k)
