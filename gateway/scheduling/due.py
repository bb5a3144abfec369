"""What to do with a schedule that is due: fire, skip missed occurrences, advance.

When the daemon was stopped (or the host slept), several occurrences may be overdue. Only
the latest one is fired, and only if it is at most ``grace`` seconds old; every other
overdue occurrence is counted as skipped. Dense crons missed for a long time are not
walked one by one: after :data:`MAX_WALK` occurrences the walk jumps to the grace window
and the count becomes a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.scheduling.cron import next_run

MAX_WALK = 1000


@dataclass(frozen=True, slots=True)
class DuePlan:
    """The outcome of one due schedule.

    Attributes:
        fire_at: the occurrence to fire now, or None when all are too old.
        skipped: how many overdue occurrences are not fired.
        skipped_is_lower_bound: True when the walk jumped and ``skipped`` is a minimum.
        last_skipped_at: the latest occurrence not fired, or None.
        next_at: the next occurrence after now; None for a one-shot.
    """

    fire_at: float | None
    skipped: int
    skipped_is_lower_bound: bool
    last_skipped_at: float | None
    next_at: float | None

    def skip_note(self) -> str | None:
        """The ``schedule_runs.error`` text for the skipped occurrences, or None."""
        if not self.skipped:
            return None
        count = f"at least {self.skipped}" if self.skipped_is_lower_bound else str(self.skipped)
        return f"missed {count} run{'s' if self.skipped != 1 else ''} while stopped"


def plan_cron(cron_expr: str, tz: str, first_due: float, now: float, grace: float) -> DuePlan:
    """Plan a cron schedule whose ``next_run_at`` (``first_due``) is at or before ``now``.

    Raises:
        ScheduleError: the stored expression or timezone is not usable.
    """
    skipped, last_skipped, jumped = 0, None, False
    latest: float | None = None
    cursor, walked = first_due, 0
    while cursor <= now:
        if latest is not None:
            skipped, last_skipped = skipped + 1, latest
        latest, walked = cursor, walked + 1
        if not jumped and walked >= MAX_WALK and now - cursor > grace:
            jumped = True
            skipped, last_skipped, latest = skipped + 1, cursor, None
            cursor = next_run(cron_expr, tz, max(cursor, now - grace - 1.0))
            continue
        cursor = next_run(cron_expr, tz, cursor)
    fire_at = latest if latest is not None and now - latest <= grace else None
    if latest is not None and fire_at is None:
        skipped, last_skipped = skipped + 1, latest
    return DuePlan(fire_at, skipped, jumped, last_skipped, cursor)


def plan_once(run_at: float, now: float, grace: float) -> DuePlan:
    """Plan a one-shot schedule whose time has come."""
    if now - run_at <= grace:
        return DuePlan(run_at, 0, False, None, None)
    return DuePlan(None, 1, False, run_at, None)
