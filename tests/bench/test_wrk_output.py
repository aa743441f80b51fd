"""Reading wrk's report: the figures the API benchmark prints come from these lines."""

from __future__ import annotations

import pytest

from bench.support import parse_wrk

# A real wrk 4.1 report whose Req/Sec "+/- Stdev" column ends in "50%": an unanchored search for
# "50%" took the word after it ("Latency") for the median and crashed bench/api.py.
REPORT = """\
Running 10s test @ http://127.0.0.1:8080/api/v1/shelves/
  2 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    40.52ms    5.10ms  61.00ms   72.50%
    Req/Sec   620.31     51.20   700.00     62.50%
  Latency Distribution
     50%   39.87ms
     75%   42.00ms
     90%   45.10ms
     99%    1.02s
  12350 requests in 10.00s, 4.00MB read
  Non-2xx or 3xx responses: 7
Requests/sec:   1235.00
Transfer/sec:    409.60KB
"""


def test_the_percentiles_come_from_the_latency_distribution() -> None:
    result = parse_wrk(REPORT)

    assert result.requests_per_s == 1235.0
    assert result.p50_ms == pytest.approx(39.87)
    assert result.p99_ms == pytest.approx(1020.0)
    assert result.non_2xx == 7


def test_a_report_without_the_distribution_is_a_clear_error() -> None:
    without = REPORT.split("  Latency Distribution")[0] + "Requests/sec:   1235.00\n"

    with pytest.raises(ValueError, match="--latency"):
        parse_wrk(without)


def test_socket_errors_and_timeouts_are_read() -> None:
    report = REPORT.replace(
        "  Non-2xx or 3xx responses: 7\n",
        "  Socket errors: connect 1, read 2, write 3, timeout 4\n  Non-2xx or 3xx responses: 7\n",
    )

    result = parse_wrk(report)

    assert (result.requests, result.socket_errors, result.timeouts) == (12350, 6, 4)
