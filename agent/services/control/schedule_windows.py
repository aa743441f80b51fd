"""Daily on-windows in a time zone: their edges as cron triggers, and whether one is open at T.

A window is on from ``start`` and off from ``end`` (local wall-clock HH:MM); ``end`` before
``start`` crosses midnight. The edges are APScheduler ``CronTrigger`` fire times, the same
triggers the scheduler runs, so "open at T" and "what the scheduler did" cannot disagree:
the window is open at T when the latest edge at or before T is a start.

Daylight saving time: on the spring-forward day an edge inside the missing hour fires once, at
the same UTC offset as before the change (02:30 CET is 03:30 CEST). On the fall-back day a
CronTrigger fires an edge in the repeated hour twice (APScheduler 3.x, seen with 3.11); only
the first fire of an edge per local date counts, so no window opens or closes twice. A window
that lies wholly inside the missing hour (02:30-03:00) stays closed that day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from apscheduler.triggers.cron import CronTrigger

__all__ = ["Window", "edges", "is_open", "parse_clock"]

# Two days back always holds the latest start and end edge of a daily window.
_LOOKBACK = timedelta(days=2)
_STEP = timedelta(microseconds=1)


def parse_clock(text: str) -> time:
    """``HH:MM`` as a time of day."""
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


@dataclass(frozen=True)
class Window:
    """A daily window in local wall-clock time."""

    start: time
    end: time

    @classmethod
    def of(cls, start: str, end: str) -> Window:
        """A window from two ``HH:MM`` strings; they must differ."""
        window = cls(parse_clock(start), parse_clock(end))
        if window.start == window.end:
            raise ValueError("a window's start and end must differ")
        return window

    def trigger(self, opens: bool, tz: tzinfo) -> CronTrigger:
        """The cron trigger of the opening (``opens``) or closing edge."""
        moment = self.start if opens else self.end
        return CronTrigger(hour=moment.hour, minute=moment.minute, timezone=tz)


def _fires(trigger: CronTrigger, since: datetime, until: datetime) -> list[datetime]:
    """Fire times in [since, until], keeping only the first per local date (DST fall-back)."""
    fires: list[datetime] = []
    seen: set[date] = set()
    moment: datetime | None = trigger.get_next_fire_time(None, since)
    while moment is not None and moment <= until:
        if moment.date() not in seen:
            seen.add(moment.date())
            fires.append(moment)
        # In UTC: aware arithmetic in a local zone drops ``fold`` and lands an hour early
        # in the repeated hour of a fall-back day.
        moment = trigger.get_next_fire_time(moment, moment.astimezone(UTC) + _STEP)
    return fires


def edges(
    window: Window, tz: tzinfo, since: datetime, until: datetime
) -> list[tuple[datetime, bool]]:
    """Every edge in [since, until] as (UTC instant, opens), in time order.

    In UTC because aware datetimes of an ambiguous local hour never compare equal across zones.
    """
    found = [
        (moment, True)
        for moment in _fires(window.trigger(True, tz), since, until)
        # Through UTC: astimezone to the trigger's own zone keeps a non-existent local time.
        if not _fell_in_the_gap(window, moment.astimezone(UTC).astimezone(tz))
    ]
    found += [(moment, False) for moment in _fires(window.trigger(False, tz), since, until)]
    found = [(moment.astimezone(UTC), opens) for moment, opens in found]
    return sorted(found, key=lambda edge: edge[0])


def _fell_in_the_gap(window: Window, opening: datetime) -> bool:
    """Whether a spring-forward gap swallowed the whole window on ``opening``'s day.

    An opening edge in the missing hour fires an hour late; if the window's end came in between
    (02:30-03:00 when 02:00 jumps to 03:00), opening then would leave the window open until
    the next day's end. Such a window is empty that day, as its wall-clock times never existed.
    """
    shifted = opening.time().replace(second=0, microsecond=0, tzinfo=None)
    if shifted == window.start or window.end < window.start:
        return False  # not moved by a gap, or a window crossing midnight (ends the next day)
    return window.start < window.end <= shifted


def is_open(window: Window, tz: tzinfo, at: datetime) -> bool:
    """Whether the window is open at ``at`` (an aware datetime): the latest edge opened it."""
    recent = edges(window, tz, at - _LOOKBACK, at)
    return bool(recent) and recent[-1][1]
