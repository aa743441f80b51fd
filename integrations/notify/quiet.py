"""Quiet hours: a daily window, in the farm's local time, during which a contact point is sent
only critical messages; the others wait for the window's end."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

__all__ = ["HHMM", "parse_hhmm", "quiet_until"]

HHMM = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")


def parse_hhmm(text: str) -> time:
    """``'22:30'`` as a time; a ``ValueError`` for anything else."""
    if not HHMM.match(text):
        raise ValueError("a time of day as HH:MM (00:00 to 23:59)")
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


def quiet_until(now: datetime, start: str | None, end: str | None, zone: str) -> datetime | None:
    """The end of the quiet window ``now`` (aware) falls in, or None outside it (or with no
    window). A window whose start is after its end spans midnight; equal times mean none."""
    if start is None or end is None:
        return None
    begin, finish = parse_hhmm(start), parse_hhmm(end)
    if begin == finish:
        return None
    local = now.astimezone(ZoneInfo(zone))
    today = local.date()
    for day in (today - timedelta(days=1), today):
        opens = datetime.combine(day, begin, local.tzinfo)
        closes_day = day if begin < finish else day + timedelta(days=1)
        closes = datetime.combine(closes_day, finish, local.tzinfo)
        if opens <= local < closes:
            return closes.astimezone(now.tzinfo)
    return None
