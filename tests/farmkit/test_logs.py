"""The service log a farmer or operator reads: one line per thing that happened."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from farmkit.logs import configure_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    scheduler_level = logging.getLogger("apscheduler").level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("apscheduler").setLevel(scheduler_level)


def test_routine_scheduler_runs_stay_out_of_the_info_log_but_failures_do_not() -> None:
    configure_logging("INFO")
    scheduler_log = logging.getLogger("apscheduler.executors.default")
    assert not scheduler_log.isEnabledFor(logging.INFO)
    assert scheduler_log.isEnabledFor(logging.WARNING)


def test_debug_shows_the_scheduler_too() -> None:
    logging.getLogger("apscheduler").setLevel(logging.NOTSET)
    configure_logging("DEBUG")
    assert logging.getLogger("apscheduler.executors.default").isEnabledFor(logging.DEBUG)
