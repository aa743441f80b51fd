"""Helpers shared by the benchmarks: free ports, subprocess servers, wrk runs."""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.measure import Failures
from tests.support.agent_process import AgentProcess
from tests.support.mosquitto import free_port as free_port

ROOT = Path(__file__).resolve().parent.parent


def wait_http(url: str, timeout_s: float = 30.0) -> None:
    """Poll ``url`` until it answers 200."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up within {timeout_s} s")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of a process in MiB (Linux /proc); ``field="VmHWM"``: its peak since it
    started, as the kernel kept it (no sample can miss it)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def request_json(
    url: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None
) -> Any:
    """A blocking JSON request (seeding only; never on a measured path)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


def start_agent(admin_password: str, extra_env: dict[str, str] | None = None) -> AgentProcess:
    """Start ``python -m agent run`` on a temporary state directory (removed when the bench
    exits) with rate limits lifted (they would throttle a load test); wait until it serves."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    agent = AgentProcess(
        workdir / "state",
        {
            "FARM_ADMIN_EMAIL": "bench@farm.local",
            "FARM_ADMIN_PASSWORD": admin_password,
            "FARM_RATE_LIMIT_PER_PREMIUM_USER": "0",
            "FARM_LOG_LEVEL": "WARNING",
            # As a deployed agent finds its clock (the tests assume a set one).
            "FARM_CLOCK_SYNC_SOURCE": "auto",
            **(extra_env or {}),
        },
    )
    agent.spawn()
    wait_http(agent.url + "/health")
    return agent


@dataclass
class WrkResult:
    """What wrk measured."""

    requests_per_s: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    """Answers outside 2xx (wrk counts 3xx with them; no benchmarked endpoint redirects)."""
    requests: int = 0
    """Answers received."""
    socket_errors: int = 0
    """Connections that failed to connect, read or write."""
    timeouts: int = 0
    """Requests without an answer within wrk's timeout (2 s)."""

    def count_failures(self, failures: Failures, what: str) -> None:
        """Count this run's non-2xx answers, socket errors and timeouts against the run."""
        failures.add(f"{what}: non-2xx", self.non_2xx)
        failures.add(f"{what}: socket errors", self.socket_errors)
        failures.add(f"{what}: timeouts", self.timeouts)


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if match is None:
        raise ValueError(f"unexpected wrk latency {text!r}")
    value, unit = match.groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]


def wrk(
    url: str,
    *,
    connections: int,
    seconds: int,
    script: str | None = None,
    headers: dict[str, str] | None = None,
    threads: int = 2,
) -> WrkResult:
    """Run wrk against ``url`` and parse requests/s and the latency percentiles."""
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: run scripts/bootstrap or apt-get install wrk")
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency"]
    for name, value in (headers or {}).items():
        cmd += ["-H", f"{name}: {value}"]
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        lua.write(script or "")
    if script:
        cmd += ["-s", lua.name]
    out = subprocess.run([*cmd, url], capture_output=True, text=True, check=True).stdout
    os.unlink(lua.name)
    return parse_wrk(out)


def parse_wrk(out: str) -> WrkResult:
    """Requests/s, p50, p99 and non-2xx count from wrk's ``--latency`` report.

    The percentiles are read only from the "Latency Distribution" block, one anchored line each:
    the "Thread Stats" table above it ends its Req/Sec line in a "+/- Stdev" column such as
    ``72.50%``, which an unanchored ``50%`` search would take for the median.
    """
    rps = re.search(r"^Requests/sec:\s+([\d.]+)\s*$", out, re.MULTILINE)
    block = out.partition("Latency Distribution")[2]
    percentiles = dict(re.findall(r"^\s*(50|75|90|99)(?:\.0+)?%\s+(\S+)\s*$", block, re.MULTILINE))
    if rps is None or not block or not {"50", "99"} <= percentiles.keys():
        raise ValueError(f"unexpected wrk output (was it run with --latency?):\n{out}")
    non_2xx = re.search(r"^\s*Non-2xx or 3xx responses:\s+(\d+)\s*$", out, re.MULTILINE)
    total = re.search(r"^\s*(\d+) requests in ", out, re.MULTILINE)
    errors = re.search(
        r"^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)\s*$",
        out,
        re.MULTILINE,
    )
    connect, read, write, timeout = (int(n) for n in errors.groups()) if errors else (0,) * 4
    return WrkResult(
        float(rps.group(1)),
        _ms(percentiles["50"]),
        _ms(percentiles["99"]),
        int(non_2xx.group(1)) if non_2xx else 0,
        int(total.group(1)) if total else 0,
        connect + read + write,
        timeout,
    )
