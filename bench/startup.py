"""Start-up: process start to systemd READY=1 with a large database, and RSS once ready.

Run: .venv/bin/python bench/startup.py [--readings 10000000] [--devices 50] [--runs 3]
Target (issue 13): READY within 3 s and <= 80 MB RSS with 10 million readings.
Baseline, measured in the same run: a bare aiohttp app (bench/bare_server.py), from process
start to its first answer, and its RSS then.

The agent is started as systemd would (``farm-agent run`` with a NOTIFY_SOCKET this script
listens on); READY=1 comes once the store is open (quick_check included) and the API listens.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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
        "INSERT INTO readings (series_id, ts, value) VALUES (?, ?, ?)",
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
    }


def start_agent(state: Path) -> tuple[float, float]:
    """Seconds from process start to READY=1, and RSS (MiB) then."""
    notify = state.parent / f"notify-{uuid.uuid4().hex[:8]}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(notify))
    listener.settimeout(_TIMEOUT_S)
    try:
        began = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "agent", "run"],
            env=_agent_env(state, free_port(), notify),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while True:
                message = listener.recv(4096).decode()
                if "READY=1" in message.splitlines():
                    elapsed = time.perf_counter() - began
                    break
            rss = rss_mb(process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
    finally:
        listener.close()
        notify.unlink(missing_ok=True)
    return elapsed, rss


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


def main() -> None:
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
        agent = [start_agent(state) for _ in range(args.runs)]
        bare = [start_bare() for _ in range(args.runs)]
    ready = statistics.median(run[0] for run in agent)
    agent_rss = statistics.median(run[1] for run in agent)
    bare_ready = statistics.median(run[0] for run in bare)
    bare_rss = statistics.median(run[1] for run in bare)
    print(f"runs: {args.runs} each, medians")
    print(f"agent start -> READY=1: {ready:6.2f} s   (target <= 3 s)")
    print(f"agent RSS at READY:     {agent_rss:6.1f} MiB (target <= 80 MB)")
    print(f"bare aiohttp start -> first answer: {bare_ready:6.2f} s, RSS {bare_rss:.1f} MiB")
    print(f"ratio agent / bare: start {ready / bare_ready:.1f}x, RSS {agent_rss / bare_rss:.1f}x")


if __name__ == "__main__":
    main()
