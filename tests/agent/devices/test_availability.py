"""Availability rules: status topics are authoritative, silence timeouts, on a fake clock."""

from __future__ import annotations

from agent.devices.availability import AvailabilityTracker
from tests.agent.devices.conftest import FakeClock


def test_status_topic_decides_and_reports_only_transitions() -> None:
    clock = FakeClock()
    tracker = AvailabilityTracker(clock)
    tracker.track("fan", silence_timeout=None)
    assert tracker.is_online("fan") is None
    change = tracker.observe_status("fan", True)
    assert change is not None and (change.online, change.reason) == (True, "status")
    assert tracker.observe_status("fan", True) is None
    assert tracker.observe_message("fan") is None
    change = tracker.observe_status("fan", False)
    assert change is not None and (change.online, change.reason) == (False, "status")


def test_message_after_last_will_does_not_resurrect_the_device() -> None:
    tracker = AvailabilityTracker(FakeClock())
    tracker.track("sensor", silence_timeout=None)
    tracker.observe_status("sensor", False)
    assert tracker.observe_message("sensor") is None
    assert tracker.is_online("sensor") is False


def test_any_message_means_online_without_a_status_topic() -> None:
    tracker = AvailabilityTracker(FakeClock())
    tracker.track("json", silence_timeout=120)
    change = tracker.observe_message("json")
    assert change is not None and (change.online, change.reason) == (True, "message")


def test_silence_timeout_marks_offline_until_the_device_speaks_again() -> None:
    clock = FakeClock()
    tracker = AvailabilityTracker(clock)
    tracker.track("json", silence_timeout=120)
    tracker.observe_message("json")
    clock.advance(119)
    assert tracker.expire() == []
    assert tracker.next_deadline() == clock.now + 1
    clock.advance(1)
    [change] = tracker.expire()
    assert (change.device_id, change.online, change.reason) == ("json", False, "silence")
    assert tracker.expire() == []
    assert tracker.next_deadline() is None
    back = tracker.observe_message("json")
    assert back is not None and back.online is True


def test_silence_applies_on_top_of_an_online_status() -> None:
    clock = FakeClock()
    tracker = AvailabilityTracker(clock)
    tracker.track("tasmota", silence_timeout=900)
    tracker.observe_status("tasmota", True)
    clock.advance(901)
    [change] = tracker.expire()
    assert change.online is False
    assert tracker.observe_message("tasmota") is not None
    assert tracker.is_online("tasmota") is True


def test_device_never_heard_from_goes_offline_after_one_timeout() -> None:
    clock = FakeClock()
    tracker = AvailabilityTracker(clock)
    tracker.track("ezo", silence_timeout=60)
    clock.advance(60)
    [change] = tracker.expire()
    assert (change.online, change.reason) == (False, "silence")


def test_forgotten_or_unknown_devices_are_ignored() -> None:
    tracker = AvailabilityTracker(FakeClock())
    tracker.track("gone", silence_timeout=1)
    tracker.forget("gone")
    assert tracker.observe_status("gone", True) is None
    assert tracker.observe_message("never-tracked") is None
    assert tracker.is_online("gone") is None
