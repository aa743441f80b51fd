"""API throughput: GET /api/v1/farms/ and POST /api/v1/shelves/ next to a bare aiohttp handler.

Run: .venv/bin/python bench/api.py [--seconds 5] [--rounds 3] [--connections 50] [--farms 50]
Targets: farm list >= 40 % of the bare handler's requests/s with p99 <= 25 ms; shelf creation
(a durable write) >= 15 % of the bare handler with p99 <= 50 ms, both at 50 connections; agent
resident memory after the run <= 80 MB.

The farm list is the one endpoint with an answer cache (it lives until the next committed
write), so it is measured twice in each round: idle (every request a cache hit) and while a
writer renames a farm once per 100 reads (the rate of the idle run / 100; the achieved share is
printed), so that the list is computed again after every write. Every answer outside 2xx, socket
error and timeout of wrk and of the writer counts against the run (bench/measure.py).
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import Failures, Run
from bench.support import WrkResult, free_port, request_json, rss_mb, start_agent, wait_http, wrk

ROWS, RACKS, SHELVES = 2, 2, 3

THREADS = 2
WRITE_EVERY = 100
WRITERS = 8
"""Reads of the farm list per farm rename in its measurement under writes."""
# Each request takes the next free (rack, level) slot: slots are numbered across wrk's threads
# and the rounds (``base``), so no two requests ever ask for the same level of a rack (a 409)
# and levels stay within the API's 0..1000 (seeded shelves use 0..2).
SHELF_SCRIPT = """
local racks = {%s}
local threads = %d
local base = %d
local counter = 0
local offset = 0
function setup(thread)
  thread:set("offset", offset)
  offset = offset + 1
end
function init(args)
  offset = tonumber(wrk.thread:get("offset")) or 0
end
function request()
  local slot = base + counter * threads + offset
  counter = counter + 1
  local rack = racks[(slot %% #racks) + 1]
  local level = 10 + math.floor(slot / #racks)
  local body = string.format(
    '{"rack_id":"%%s","name":"bench","level":%%d,"plant_capacity":24,"current_species":"lettuce"}',
    rack, level)
  return wrk.format("POST", "/api/v1/shelves/", {["Content-Type"]="application/json",
    ["Authorization"]="Bearer %s"}, body)
end
"""


class Writer:
    """Renames a farm ``rate`` times a second while wrk reads the list: a pacing thread hands
    each write, when it is due, to a pool of WRITERS connections, so that a slow answer does not
    hold the next writes back (one connection could not keep the pace under load)."""

    def __init__(self, base: str, token: str, farm_id: str, rate: float, failures: Failures):
        self._port = int(base.rsplit(":", 1)[1])
        self._path = f"/api/v1/farms/{farm_id}"
        self._headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self._interval = 1 / max(rate, 0.1)
        self._failures = failures
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._pool = ThreadPoolExecutor(WRITERS)
        self._local = threading.local()
        self._lock = threading.Lock()
        self.writes = 0

    def _write(self, number: int) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = http.client.HTTPConnection(
                "127.0.0.1", self._port, timeout=10
            )
        body = json.dumps({"name": f"Farm renamed {number}"})
        try:
            connection.request("PUT", self._path, body, self._headers)
            response = connection.getresponse()
            response.read()
            with self._lock:
                self._failures.answer(response.status, "farm rename")
        except TimeoutError:
            with self._lock:
                self._failures.add("farm rename: timeout")
            connection.close()
        except OSError:
            with self._lock:
                self._failures.add("farm rename: socket error")
            connection.close()

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(
            max(0.0, started + self.writes * self._interval - time.monotonic())
        ):
            self._pool.submit(self._write, self.writes)
            self.writes += 1

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._pool.shutdown(wait=True)


def seed(base: str, token: str, farms: int) -> tuple[list[str], list[str]]:
    """Create ``farms`` farms with their hierarchy; return every farm id and every rack id."""
    auth = {"Authorization": f"Bearer {token}"}
    racks, farm_ids = [], []
    for f in range(farms):
        farm = request_json(
            f"{base}/api/v1/farms/", "POST", {"name": f"Farm {f:02d}", "location": "Bench"}, auth
        )
        farm_ids.append(farm["id"])
        for r in range(ROWS):
            row = request_json(
                f"{base}/api/v1/rows/",
                "POST",
                {"farm_id": farm["id"], "name": f"Row {r}", "position": r},
                auth,
            )
            for k in range(RACKS):
                rack = request_json(
                    f"{base}/api/v1/racks/",
                    "POST",
                    {
                        "row_id": row["id"],
                        "name": f"Rack {k}",
                        "position": k,
                        "height_cm": 240,
                        "width_cm": 120,
                        "depth_cm": 60,
                    },
                    auth,
                )
                racks.append(rack["id"])
                for s in range(SHELVES):
                    request_json(
                        f"{base}/api/v1/shelves/",
                        "POST",
                        {
                            "rack_id": rack["id"],
                            "name": f"Shelf {s}",
                            "level": s,
                            "plant_capacity": 24,
                            "current_species": "lettuce",
                        },
                        auth,
                    )
    return farm_ids, racks


def main() -> None:
    """Measure and print the figures with their ratio to the baseline."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=5, help="length of each measurement")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of bare, farm list (idle, then with writes), shelf creation in turn (a"
        " shared machine's load then weighs on the baseline and the agent alike); the medians"
        " are the figures",
    )
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--farms", type=int, default=50, help="farms in the listed table")
    parser.add_argument(
        "--settle", type=float, default=0, help="also measure memory after this many idle seconds"
    )
    args = parser.parse_args()
    run = Run()
    with run.reported():
        measure(args, run.failures)


def measure(args: argparse.Namespace, failures: Failures) -> None:
    """The rounds and their report; failures counted into ``failures``."""
    port = free_port()
    bare = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "bare_server.py"), str(port)]
    )
    # No broker, no serial port: the API alone (an agent would reach for any broker on 1883).
    agent = start_agent(
        "bench-password-1", {"FARM_MQTT_ENABLED": "false", "FARM_SERIAL_ENABLED": "false"}
    )
    rounds: list[dict[str, WrkResult]] = []
    shares: list[float] = []  # writes per read in each round's farm list under writes
    try:
        wait_http(f"http://127.0.0.1:{port}/")
        login = request_json(
            f"{agent.url}/api/v1/login",
            "POST",
            {"email": "bench@farm.local", "password": "bench-password-1"},
        )
        token = login["access_token"]
        farm_ids, racks = seed(agent.url, token, args.farms)
        auth = {"Authorization": f"Bearer {token}"}
        rack_list = ",".join(f'"{r}"' for r in racks)
        used = 0  # shelf slots taken by earlier rounds

        def farm_list() -> WrkResult:
            return wrk(
                f"{agent.url}/api/v1/farms/",
                connections=args.connections,
                seconds=args.seconds,
                headers=auth,
                threads=THREADS,
            )

        for _ in range(args.rounds):
            run = {
                "base": wrk(
                    f"http://127.0.0.1:{port}/",
                    connections=args.connections,
                    seconds=args.seconds,
                    threads=THREADS,
                ),
                "farms": farm_list(),
            }
            # The reads slow down under writes: the writer's rate is corrected from the last
            # try's share until it is within a quarter of 1 per WRITE_EVERY (three tries at most).
            rate = run["farms"].requests_per_s / WRITE_EVERY
            for _ in range(3):
                with Writer(agent.url, token, farm_ids[0], rate, failures) as writer:
                    run["farms_written"] = farm_list()
                share = writer.writes / max(run["farms_written"].requests, 1) * WRITE_EVERY
                if 0.75 <= share <= 1.25:
                    break
                rate /= max(share, 0.01)
            shares.append(share / WRITE_EVERY)
            run["shelves"] = wrk(
                f"{agent.url}/api/v1/shelves/",
                connections=args.connections,
                seconds=args.seconds,
                script=SHELF_SCRIPT % (rack_list, THREADS, used, token),
                threads=THREADS,
            )
            rounds.append(run)
            # Requests still in flight when wrk stopped took slots too: leave a margin.
            used += int(run["shelves"].requests_per_s * args.seconds * 1.2) + 4 * args.connections
        memory = rss_mb(agent.process.pid)
        settled = memory
        if args.settle:
            time.sleep(args.settle)
            settled = rss_mb(agent.process.pid)
    finally:
        agent.stop()
        bare.terminate()
        bare.wait(timeout=10)

    names = {
        "base": "bare aiohttp JSON handler",
        "farms": f"GET /api/v1/farms/ ({args.farms} farms)",
        "farms_written": "GET /api/v1/farms/, 1 write/100",
        "shelves": "POST /api/v1/shelves/",
    }
    for run in rounds:
        for key, name in names.items():
            run[key].count_failures(failures, name)
    header = f"{'endpoint':32} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8} {'ratio':>7}"
    for number, run in enumerate(rounds, 1):
        print(f"round {number} of {len(rounds)}")
        print(header)
        for key, name in names.items():
            result = run[key]
            ratio = result.requests_per_s / run["base"].requests_per_s
            print(
                f"{name:32} {result.requests_per_s:9.0f} {result.p50_ms:8.2f} "
                f"{result.p99_ms:8.2f} {result.non_2xx:8d} {ratio:7.1%}"
            )
    print(f"median of {len(rounds)} rounds (ratio: each round's to its own bare run)")
    print(header)
    figures = {}
    for key, name in names.items():
        ratio = median(run[key].requests_per_s / run["base"].requests_per_s for run in rounds)
        p99 = median(run[key].p99_ms for run in rounds)
        figures[key] = (ratio, p99)
        print(
            f"{name:32} {median(run[key].requests_per_s for run in rounds):9.0f} "
            f"{median(run[key].p50_ms for run in rounds):8.2f} {p99:8.2f} "
            f"{sum(run[key].non_2xx for run in rounds):8d} {ratio:7.1%}"
        )
    print(
        f"writes per read during the written farm list: 1 per {1 / max(median(shares), 1e-9):.0f}"
    )
    print(f"agent resident memory after the run: {memory:.1f} MB")
    if args.settle:
        print(f"agent resident memory {args.settle:.0f} s later: {settled:.1f} MB")
    (farm_ratio, farm_p99), (written_ratio, written_p99), (write_ratio, write_p99) = (
        figures["farms"],
        figures["farms_written"],
        figures["shelves"],
    )

    def verdict(met: bool) -> str:
        return "met" if met else "MISSED"

    print(
        f"targets: farm list >= 40% of bare (idle {verdict(farm_ratio >= 0.40)}, with writes"
        f" {verdict(written_ratio >= 0.40)}), p99 <= 25 ms (idle {verdict(farm_p99 <= 25)},"
        f" with writes {verdict(written_p99 <= 25)}); shelf creation >= 15% of bare"
        f" ({verdict(write_ratio >= 0.15)}), p99 <= 50 ms ({verdict(write_p99 <= 50)});"
        f" memory <= 80 MB ({verdict(memory <= 80)})"
    )


if __name__ == "__main__":
    main()
