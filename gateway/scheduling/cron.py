"""Cron expressions, one-shot times and DST-correct next occurrences.

Schedules run on the wall clock of their own IANA timezone. Around DST changes:

- Spring forward: an occurrence whose local time falls into the skipped hour runs once, at
  the first existing minute after the gap (croniter's behaviour). ``30 2 * * *`` in
  Europe/Berlin runs at 03:00 CEST on the change day.
- Fall back: a fixed-time job runs once, in the first pass of the repeated hour; the second
  pass is skipped. A job whose minute or hour field starts with ``*`` (``*/15 * * * *``,
  ``0 * * * *``) follows elapsed time and fires in both passes, as Vixie cron does.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

from gateway.errors import RefusedError

CRON_HINT = "use 5 fields: minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5'"
# A fixed-time job matches at most 60 minutes of a repeated hour; skipping them is bounded.
_MAX_SKIPS = 2000


class ScheduleError(RefusedError, ValueError):
    """A schedule definition that cannot work; the message says what to send instead."""


def zone(name: str) -> ZoneInfo:
    """The :class:`~zoneinfo.ZoneInfo` for an IANA name.

    Raises:
        ScheduleError: the name is not a known IANA timezone.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"unknown timezone {name!r}; use an IANA name such as UTC, Europe/Berlin or America/New_York"
        ) from None


def validate_cron(expr: str) -> str:
    """Check a 5-field cron expression; return it with whitespace normalized.

    Seconds and year fields (6 or 7 fields), ``@daily``-style nicknames and hashed ``H``
    fields are rejected, as are expressions that never match (``0 0 31 2 *``).

    Raises:
        ScheduleError: the expression is not usable.
    """
    fields = expr.split()
    if len(fields) != 5:
        raise ScheduleError(f"cronExpr {expr!r} has {len(fields)} field(s); {CRON_HINT}")
    normalized = " ".join(fields)
    try:
        croniter(normalized, datetime(2000, 1, 1, tzinfo=ZoneInfo("UTC"))).get_next(float)
    except CroniterBadDateError:
        raise ScheduleError(f"cronExpr {normalized!r} never matches a date; {CRON_HINT}") from None
    except (CroniterError, ValueError, TypeError, KeyError) as exc:
        raise ScheduleError(f"cronExpr {normalized!r} is not valid ({exc}); {CRON_HINT}") from None
    return normalized


def _follows_elapsed_time(cron_expr: str) -> bool:
    minute, hour = cron_expr.split()[:2]
    return minute.startswith("*") or hour.startswith("*")


def _repeated_wall_time(moment: datetime) -> bool:
    """True for the second pass of a wall-clock time repeated when clocks go back."""
    return moment.fold == 1 and moment.replace(fold=0).utcoffset() != moment.utcoffset()


def next_run(cron_expr: str, tz: str, after: float) -> float:
    """The first occurrence of ``cron_expr`` strictly after ``after`` (epoch seconds).

    The expression is read on the wall clock of ``tz``; see the module docstring for the
    DST rules.

    Raises:
        ScheduleError: the expression or timezone is not usable, or it never matches again.
    """
    where = zone(tz)
    try:
        it = croniter(cron_expr, datetime.fromtimestamp(after, where))
        skip_repeats = not _follows_elapsed_time(cron_expr)
        for _ in range(_MAX_SKIPS):
            candidate: datetime = it.get_next(datetime)
            if skip_repeats and _repeated_wall_time(candidate):
                continue
            return candidate.timestamp()
    except CroniterBadDateError:
        raise ScheduleError(f"cronExpr {cron_expr!r} has no occurrence after {iso(after, tz)}") from None
    except (CroniterError, ValueError, TypeError, KeyError) as exc:
        raise ScheduleError(f"cronExpr {cron_expr!r} is not valid ({exc}); {CRON_HINT}") from None
    raise ScheduleError(f"cronExpr {cron_expr!r} has no usable occurrence after {iso(after, tz)}")


def parse_run_at(text: str, tz: str) -> float:
    """An ISO 8601 time as epoch seconds; without an offset it is read in ``tz``.

    Raises:
        ScheduleError: not ISO 8601, or a local time that does not exist (DST gap).
    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ScheduleError(
            f"runAt {text!r} is not an ISO 8601 time; send e.g. '2030-01-31T09:00' "
            "(read in the schedule's timezone) or '2030-01-31T09:00:00+01:00'"
        ) from None
    if moment.tzinfo is not None:
        return moment.timestamp()
    where = zone(tz)
    local = moment.replace(tzinfo=where)
    # A wall time inside a spring-forward gap does not survive the round trip through UTC.
    if local.astimezone(ZoneInfo("UTC")).astimezone(where).replace(tzinfo=None) != moment:
        raise ScheduleError(f"runAt {text!r} does not exist in {tz} (the clocks skip it); pick another time")
    return local.timestamp()


def iso(ts: float | None, tz: str) -> str | None:
    """Epoch seconds as ISO 8601 in ``tz`` (seconds precision), or None."""
    if ts is None:
        return None
    try:
        where = zone(tz)
    except ScheduleError:
        where = ZoneInfo("UTC")
    return datetime.fromtimestamp(ts, where).isoformat(timespec="seconds")
