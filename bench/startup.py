"""Start-up: process start to systemd READY=1 with a large database, and RSS once ready.

Run: .venv/bin/python bench/startup.py [--readings 10000000] [--devices 50] [--runs 3]
Target (issue 13): READY within 3 s and <= 80 MB RSS with 10 million readings.
Baseline, measured in the same run: a bare aiohttp app (bench/bare_server.py), from process
start to its first answer, and its RSS then.

The agent is started as systemd would (``farm-agent run`` with a NOTIFY_SOCKET this script
listens on); READY=1 comes once the store is open (quick_check of every table but the reading
tables) and the API listens. The reading tables are checked in a thread begun at start-up
(agent/ops/integrity.py); the end of that check is timed separately, from the agent's log line.

A Pi boots cold from its SD card: before every start the state files (the database, its WAL
and shared-memory file) are written out and dropped from the page cache
(``posix_fadvise(POSIX_FADV_DONTNEED)``), so that the start reads them from the disk. The
interpreter and the libraries stay cached (they would be on a Pi only on a warm restart).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.store.readings import BUCKET_MS
from bench.measure import Failures, Run, percentile
from bench.support import ROOT, free_port, rss_mb

NOW_TEXT = "2026-01-01T00:00:00.000Z"
T0 = 1_735_689_600_000
_TIMEOUT_S = 300.0


def seed(state: Path, readings: int, devices: int) -> None:
    """An agent database (schema by a first start) holding ``readings`` raw readings."""
    start_agent(state)  # the first start creates the schema and the first admin
    conn = sqlite3.connect(state / "agent.db", isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")  # seeding only
    # Seeded history is not a change to sync: keep the outbox trigger out of the bulk insert.
    (trigger,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'outbox_readings'"
    ).fetchone()
    conn.execute("DROP TRIGGER outbox_readings")
    conn.execute("BEGIN")
    user = conn.execute("SELECT id FROM users LIMIT 1").fetchone()[0]
    farm = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO farms (id, name, status, created_by, created_at, updated_at)"
        " VALUES (?, 'Bench', 'active', ?, ?, ?)",
        (farm, user, NOW_TEXT, NOW_TEXT),
    )
    series = []
    for index in range(devices):
        device = str(uuid.uuid4())
        conn.execute(
            "INSERT INTO devices (id, farm_id, name, kind, device_type, created_at, updated_at)"
            " VALUES (?, ?, ?, 'sensor', 'ph_sensor', ?, ?)",
            (device, farm, f"pH {index}", NOW_TEXT, NOW_TEXT),
        )
        series.append(
            conn.execute(
                "INSERT INTO series (device_id, metric, unit, created_at)"
                " VALUES (?, 'ph', 'pH', ?) RETURNING id",
                (device, NOW_TEXT),
            ).fetchone()[0]
        )
    per_series = max(1, readings // devices)
    conn.executemany(
        "INSERT INTO readings (bucket, series_id, ts, value)"
        f" VALUES (?2 / {BUCKET_MS}, ?1, ?2, ?3)",
        (
            (series_id, T0 + i * 10_000, 6.0 + (i % 100) / 100)
            for series_id in series
            for i in range(per_series)
        ),
    )
    conn.execute("COMMIT")
    conn.execute(trigger)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def drop_cache(state: Path) -> int:
    """Write the state files out and drop them from the page cache; the bytes dropped."""
    dropped = 0
    for path in sorted(state.glob("agent.db*")):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages are not dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            dropped += os.fstat(fd).st_size
        finally:
            os.close(fd)
    return dropped


CHECKED = "database integrity check of the reading tables: ok"
DAMAGED = "the reading tables are damaged"


def _agent_env(state: Path, port: int, notify: Path) -> dict[str, str]:
    return {
        **os.environ,
        "NOTIFY_SOCKET": str(notify),
        "FARM_STATE_DIR": str(state),
        "FARM_HOST": "127.0.0.1",
        "FARM_PORT": str(port),
        "FARM_MQTT_ENABLED": "false",
        "FARM_SERIAL_ENABLED": "false",
        "FARM_ADMIN_PASSWORD": "bench password for start-up",
        "FARM_SYNC_ENABLED": "false",
        "FARM_LOG_LEVEL": "INFO",  # the reading tables' check says when it ends
    }


@dataclass
class Start:
    """One start of the agent."""

    ready_s: float
    """Process start to READY=1."""
    checked_s: float
    """Process start to the end of the reading tables' check (infinite: it never ended)."""
    rss_mib: float
    """Resident memory at READY."""


def start_agent(state: Path, cold: bool = False) -> Start:
    """Start the agent (with ``cold``, its state files dropped from the page cache first) until
    READY=1 and the end of the reading tables' check; stop it."""
    if cold:
        drop_cache(state)
    notify = state.parent / f"notify-{uuid.uuid4().hex[:8]}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(notify))
    listener.settimeout(_TIMEOUT_S)
    checked: list[float] = []
    try:
        began = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "agent", "run"],
            env=_agent_env(state, free_port(), notify),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stderr is not None
        log = process.stderr

        def watch() -> None:
            for line in log:
                if CHECKED in line or DAMAGED in line:
                    checked.append(time.perf_counter() - began if CHECKED in line else math.inf)
            # read to the end: a full pipe would block the agent

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            while True:
                message = listener.recv(4096).decode()
                if "READY=1" in message.splitlines():
                    elapsed = time.perf_counter() - began
                    break
            rss = rss_mb(process.pid)
            deadline = time.monotonic() + _TIMEOUT_S
            while not checked and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.01)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
            watcher.join(10)
    finally:
        listener.close()
        notify.unlink(missing_ok=True)
    return Start(elapsed, checked[0] if checked else math.inf, rss)


def start_bare() -> tuple[float, float]:
    """Seconds from process start to the bare app's first answer, and its RSS (MiB) then."""
    port = free_port()
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "bare_server.py"), str(port)], cwd=ROOT
    )
    try:
        deadline = time.monotonic() + _TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1):
                    elapsed = time.perf_counter() - began
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the bare app did not answer") from None
                time.sleep(0.005)
        rss = rss_mb(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    return elapsed, rss


def main(failures: Failures) -> None:
    """Seed, then start the agent and the baseline ``runs`` times each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readings", type=int, default=10_000_000)
    parser.add_argument("--devices", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        began = time.perf_counter()
        seed(state, args.readings, args.devices)
        size = sum(p.stat().st_size for p in state.glob("agent.db*")) / 2**20
        print(
            f"seeded {args.readings:,} readings of {args.devices} devices"
            f" in {time.perf_counter() - began:.1f} s; database {size:.0f} MiB"
        )
        agent = [start_agent(state, cold=True) for _ in range(args.runs)]
        bare = [start_bare() for _ in range(args.runs)]
    ready = percentile([run.ready_s for run in agent], 50)
    checked = percentile([run.checked_s for run in agent], 50)
    agent_rss = percentile([run.rss_mib for run in agent], 50)
    bare_ready = percentile([run[0] for run in bare], 50)
    bare_rss = percentile([run[1] for run in bare], 50)
    failures.add("reading tables' check never ended", sum(r.checked_s == math.inf for r in agent))
    print(f"runs: {args.runs} each, medians; the agent's state files dropped from the page cache"
          " before each start")  # fmt: skip
    print(f"agent start -> READY=1: {ready:6.2f} s   (target <= 3 s, cold)")
    print(
        f"agent start -> reading tables checked: {checked:6.2f} s (in a thread, begun before READY)"
    )
    print(f"agent RSS at READY:     {agent_rss:6.1f} MiB (target <= 80 MB)")
    print(f"bare aiohttp start -> first answer: {bare_ready:6.2f} s, RSS {bare_rss:.1f} MiB")
    print(f"ratio agent / bare: start {ready / bare_ready:.1f}x, RSS {agent_rss / bare_rss:.1f}x")


if __name__ == "__main__":
    run = Run()
    with run.reported():
        main(run.failures)
