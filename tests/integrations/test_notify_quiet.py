"""Quiet hours and acknowledge links, as a person relies on them: a window spanning midnight
holds messages until its end in the farm's time zone, and a link works only as signed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from integrations.notify import AckLinks, LinkRefused, parse_hhmm, quiet_until


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_window_over_midnight_holds_until_its_end_the_next_morning() -> None:
    assert quiet_until(at("2026-03-10T23:30"), "22:00", "06:00", "UTC") == at("2026-03-11T06:00")
    assert quiet_until(at("2026-03-11T05:59"), "22:00", "06:00", "UTC") == at("2026-03-11T06:00")
    assert quiet_until(at("2026-03-11T06:00"), "22:00", "06:00", "UTC") is None
    assert quiet_until(at("2026-03-11T12:00"), "22:00", "06:00", "UTC") is None


def test_a_window_within_a_day_and_no_window() -> None:
    assert quiet_until(at("2026-03-11T13:00"), "12:00", "14:00", "UTC") == at("2026-03-11T14:00")
    assert quiet_until(at("2026-03-11T15:00"), "12:00", "14:00", "UTC") is None
    assert quiet_until(at("2026-03-11T15:00"), None, None, "UTC") is None
    assert quiet_until(at("2026-03-11T15:00"), "08:00", "08:00", "UTC") is None


def test_quiet_hours_are_the_farms_local_time() -> None:
    # 21:30 UTC is 22:30 in Berlin in winter (UTC+1): inside 22:00-06:00 there.
    until = quiet_until(at("2026-01-15T21:30"), "22:00", "06:00", "Europe/Berlin")
    assert until == at("2026-01-16T05:00")


@pytest.mark.parametrize("text", ["24:00", "7:00", "07:60", "noon", ""])
def test_a_time_of_day_is_hh_mm(text: str) -> None:
    with pytest.raises(ValueError, match="HH:MM"):
        parse_hhmm(text)


def test_an_acknowledge_link_is_checked_and_expires() -> None:
    links = AckLinks(b"k" * 32, ttl_s=3600)
    now = at("2026-03-11T02:14")
    notification_id = "7c1b7f0e-93c5-4f43-9a51-7f2d1f0e3b11"
    token = links.token(notification_id, now)
    assert links.verify(token, now + timedelta(minutes=59)) == notification_id
    with pytest.raises(LinkRefused, match="expired"):
        links.verify(token, now + timedelta(minutes=61))
    with pytest.raises(LinkRefused):
        AckLinks(b"x" * 32).verify(token, now)  # another key
    forged = token.replace(notification_id, "00000000-0000-4000-8000-000000000000")
    with pytest.raises(LinkRefused):
        links.verify(forged, now)
