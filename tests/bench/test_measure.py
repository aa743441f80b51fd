"""bench/measure.py: the one percentile, CPU meter and failure rule every benchmark uses."""

from __future__ import annotations

import math
import os

import pytest

from bench.measure import CpuMeter, Failures, Run, cpu_seconds, percentile


def test_percentiles_are_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]  # 1..100

    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0], 50) == 1.0  # rank ceil(0.5 x 2) = 1: a measured value
    assert percentile([7.0], 99) == 7.0
    assert math.isnan(percentile([], 99))


def test_an_answer_that_never_came_is_infinitely_late() -> None:
    # 2 of 100 lost: the p99 is one of them; 1 of 100 lost: the p99 is still measured.
    assert percentile([1.0] * 98 + [math.inf] * 2, 99) == math.inf
    assert percentile([1.0] * 99 + [math.inf], 99) == 1.0


def test_every_answer_outside_2xx_counts_and_is_printed() -> None:
    failures = Failures()

    assert failures.answer(200, "list")
    assert failures.answer(204, "list")
    assert not failures.answer(503, "list")
    assert not failures.answer(409, "list")
    failures.add("lost", 3)
    failures.add("timeout", 0)

    assert failures.total == 5
    assert failures.line() == "FAILED: list HTTP 409 x1, list HTTP 503 x1, lost x3"


def test_a_run_with_a_failure_exits_1_after_printing_it(capsys: pytest.CaptureFixture[str]) -> None:
    run = Run()
    with pytest.raises(SystemExit) as stopped, run.reported():
        run.failures.add("lost")

    assert stopped.value.code == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("load average at start: ")
    assert out[-2].startswith("load average at end: ")
    assert out[-1] == "FAILED: lost x1"


def test_a_clean_run_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    with Run().reported():
        pass

    assert capsys.readouterr().out.splitlines()[-1] == "failures: none"


def test_the_cpu_meter_reads_this_process() -> None:
    meter = CpuMeter({"self": os.getpid(), "twice": (os.getpid(), os.getpid())}).start()
    sum(n * n for n in range(300_000))  # some CPU to count
    spent = meter.stop()

    assert spent["self"] >= 0
    assert spent["twice"] >= spent["self"]
    assert cpu_seconds(os.getpid(), children=True) >= cpu_seconds(os.getpid())
