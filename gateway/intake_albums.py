"""Albums (several messages sent as one, such as a Telegram media group) become one turn.

Each message of an album is committed on its own as it arrives, deduplicated and acknowledged
like any other, so nothing here changes what is stored or when the platform is told. What
changes is when its queue item is due: every message of an album is due :data:`ALBUM_WINDOW`
seconds after the first one arrived, the same moment for all of them, so the queue, which
takes a thread's due messages into one batch, answers the album once with all its files.

In a group, the caption that addresses the bot is on one photo only; the album's other
photos, which would be stored for context alone, are answered with it once one of its
messages was accepted.

The first arrival of each album is kept in memory for :data:`FORGET_AFTER` seconds. A restart
forgets it: a message of the album redelivered after the restart is due a window after it
arrives again, so it may be answered in a turn of its own after the others. That only splits
an album cut by a crash; nothing is lost or answered twice.
"""

from __future__ import annotations

from gateway.intake_rate import Pace

__all__ = ["ALBUM_WINDOW", "FORGET_AFTER", "Albums"]

ALBUM_WINDOW = 1.5
FORGET_AFTER = 120.0
_Key = tuple[str, str, str]


class Albums:
    """The albums seen lately: when each began and whether one of its messages was accepted."""

    def __init__(self, window: float = ALBUM_WINDOW) -> None:
        self.window = window
        self._first: dict[_Key, float] = {}
        self._accepted: set[_Key] = set()

    def pace(self, key: _Key, pace: Pace, now: float) -> Pace:
        """``pace`` of an accepted album message, deferred to the album's common due time."""
        self._forget(now)
        first = self._first.setdefault(key, now)
        self._accepted.add(key)
        due = max(pace.available_at, first + self.window)
        return Pace(due, deferred=True, catch_up=pace.catch_up, reason=pace.reason if pace.deferred else None)

    def answered(self, key: _Key, now: float) -> bool:
        """Whether an earlier message of the album was accepted (so this one joins its turn)."""
        self._forget(now)
        return key in self._accepted

    def _forget(self, now: float) -> None:
        old = [k for k, t in self._first.items() if now - t > FORGET_AFTER]
        for k in old:
            del self._first[k]
            self._accepted.discard(k)
