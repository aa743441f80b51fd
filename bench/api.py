"""API throughput: GET /api/v1/farms/ and POST /api/v1/shelves/ next to a bare aiohttp handler.

Run: .venv/bin/python bench/api.py [--seconds 5] [--rounds 3] [--connections 50] [--farms 50]
Targets: farm list >= 40 % of the bare handler's requests/s with p99 <= 25 ms; shelf creation
(a durable write) >= 15 % of the bare handler with p99 <= 50 ms, both at 50 connections; agent
resident memory after the run <= 80 MB.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support import WrkResult, free_port, request_json, rss_mb, start_agent, wait_http, wrk

ROWS, RACKS, SHELVES = 2, 2, 3

THREADS = 2
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


def seed(base: str, token: str, farms: int) -> list[str]:
    """Create ``farms`` farms with their hierarchy; return every rack id."""
    auth = {"Authorization": f"Bearer {token}"}
    racks = []
    for f in range(farms):
        farm = request_json(
            f"{base}/api/v1/farms/", "POST", {"name": f"Farm {f:02d}", "location": "Bench"}, auth
        )
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
    return racks


def main() -> None:
    """Measure and print the figures with their ratio to the baseline."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=5, help="length of each measurement")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of bare, farm list, shelf creation in turn (a shared machine's load then"
        " weighs on the baseline and the agent alike); the medians are the figures",
    )
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--farms", type=int, default=50, help="farms in the listed table")
    parser.add_argument(
        "--settle", type=float, default=0, help="also measure memory after this many idle seconds"
    )
    args = parser.parse_args()

    port = free_port()
    bare = subprocess.Popen(
        [sys.executable, str(Path(__file__).parent / "bare_server.py"), str(port)]
    )
    agent = start_agent("bench-password-1")
    rounds: list[dict[str, WrkResult]] = []
    try:
        wait_http(f"http://127.0.0.1:{port}/")
        login = request_json(
            f"{agent.base_url}/api/v1/login",
            "POST",
            {"email": "bench@farm.local", "password": "bench-password-1"},
        )
        token = login["access_token"]
        racks = seed(agent.base_url, token, args.farms)
        auth = {"Authorization": f"Bearer {token}"}
        rack_list = ",".join(f'"{r}"' for r in racks)
        used = 0  # shelf slots taken by earlier rounds
        for _ in range(args.rounds):
            run = {
                "base": wrk(
                    f"http://127.0.0.1:{port}/",
                    connections=args.connections,
                    seconds=args.seconds,
                    threads=THREADS,
                ),
                "farms": wrk(
                    f"{agent.base_url}/api/v1/farms/",
                    connections=args.connections,
                    seconds=args.seconds,
                    headers=auth,
                    threads=THREADS,
                ),
                "shelves": wrk(
                    f"{agent.base_url}/api/v1/shelves/",
                    connections=args.connections,
                    seconds=args.seconds,
                    script=SHELF_SCRIPT % (rack_list, THREADS, used, token),
                    threads=THREADS,
                ),
            }
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
        "shelves": "POST /api/v1/shelves/",
    }
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
    print(f"agent resident memory after the run: {memory:.1f} MB")
    if args.settle:
        print(f"agent resident memory {args.settle:.0f} s later: {settled:.1f} MB")
    (farm_ratio, farm_p99), (write_ratio, write_p99) = figures["farms"], figures["shelves"]
    print(
        f"targets: farm list >= 40% of bare ({'met' if farm_ratio >= 0.40 else 'MISSED'}), "
        f"p99 <= 25 ms ({'met' if farm_p99 <= 25 else 'MISSED'}); "
        f"shelf creation >= 15% of bare ({'met' if write_ratio >= 0.15 else 'MISSED'}), "
        f"p99 <= 50 ms ({'met' if write_p99 <= 50 else 'MISSED'}); "
        f"memory <= 80 MB ({'met' if memory <= 80 else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
