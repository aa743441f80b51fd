"""A Modbus RTU bus of simulated devices polled by the agent's ModbusBus, next to pymodbus's bare
client polling the same registers: CPU of each, and whether requests ever overlapped on the wire.

Run: .venv/bin/python bench/modbus.py [--devices 32] [--interval 10] [--seconds 60]
Target: a bus of 32 devices polled every 10 s costs the agent's poller under 2 % of one core.
The baseline, measured in the same run on the same simulated bus, is pymodbus's own async
client reading the same input registers of every device at the same pace in a plain loop
(no decoding, no bookkeeping): the floor of polling through pymodbus at all.

The devices are temperature/humidity sensors (agent/firmware_profiles/modbus-xy-md02.toml) at
unit ids 1..N on pymodbus's own server (agent/devices/simulator/modbus.py) at the far end of a
pty pair, in a process of their own. Each poller runs in its own process too; its CPU time
(/proc, bench/measure.py) is taken from its first poll to its last. The server logs every
request and answer: a request arriving while an earlier one is unanswered counts as an overlap,
and any overlap, timeout or unanswered poll fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import CpuMeter, Run
from bench.support import ROOT

PROFILE = "modbus-xy-md02"


def _profiles():  # type: ignore[no-untyped-def]
    from agent.devices.profiles import load_profiles
    from agent.settings import DEFAULT_PROFILES_DIR

    return load_profiles(DEFAULT_PROFILES_DIR)


async def serve(path: Path, devices: int) -> None:
    """The simulated bus: serve until stdin closes, then print the request log's figures."""
    from agent.devices.simulator.modbus import ModbusRtuSimulator, SimulatedModbusDevice

    profile = _profiles()[PROFILE]
    units = range(1, devices + 1)
    sim = ModbusRtuSimulator([SimulatedModbusDevice(u, profile) for u in units], path)
    await sim.start()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    print(f"requests {sim.log.requests} overlaps {sim.log.overlaps(units)}", flush=True)
    await sim.stop()


async def poll_agent(path: Path, devices: int, interval: float, seconds: float) -> None:
    """The agent's ModbusBus polling every device; prints polls answered and failed."""
    from agent.devices.modbus.bus import BusAddress, ModbusBus
    from agent.devices.modbus.codec import ModbusCodec

    profile = _profiles()[PROFILE]
    assert profile.modbus is not None
    spec = profile.modbus.model_copy(update={"poll_interval_s": interval})
    profile = profile.model_copy(update={"modbus": spec})
    bus = ModbusBus(BusAddress(port=str(path)), now=lambda: datetime.now(UTC), timeout=1.0)
    for unit in range(1, devices + 1):
        bus.add(f"device-{unit}", unit, ModbusCodec(profile))
    print("polling", flush=True)
    bus.start()
    await asyncio.sleep(seconds)
    stats = [device.stats for device in bus.devices.values()]
    await bus.close()
    answered = sum(s.answered for s in stats)
    failed = sum(s.timeouts + s.crc_errors + s.exceptions + s.connection_errors for s in stats)
    print(f"answered {answered} failed {failed}", flush=True)


async def poll_bare(path: Path, devices: int, interval: float, seconds: float) -> None:
    """pymodbus's client reading the same registers at the same pace, nothing else."""
    from pymodbus.client import AsyncModbusSerialClient

    client = AsyncModbusSerialClient(str(path), baudrate=9600, timeout=1.0, retries=0)
    await client.connect()
    answered = failed = 0
    print("polling", flush=True)
    started = time.monotonic()
    rounds = 0
    while time.monotonic() - started < seconds:
        for unit in range(1, devices + 1):
            try:
                response = await client.read_input_registers(1, count=2, device_id=unit)
                answered += 0 if response.isError() else 1
                failed += 1 if response.isError() else 0
            except Exception:
                failed += 1
        rounds += 1
        # The agent polls each device once per interval: so does the baseline.
        await asyncio.sleep(max(0.0, started + rounds * interval - time.monotonic()))
    client.close()
    print(f"answered {answered} failed {failed}", flush=True)


def _child(role: str, path: Path, args: argparse.Namespace) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "--role", role, "--path", str(path),
         "--devices", str(args.devices), "--interval", str(args.interval),
         "--seconds", str(args.seconds)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _measure(role: str, path: Path, args: argparse.Namespace) -> tuple[float, float, int, int]:
    """CPU % of one core of a poller from its first poll to its last, its CPU seconds; answered,
    failed."""
    child = _child(role, path, args)
    assert child.stdout is not None
    if child.stdout.readline().strip() != "polling":
        raise SystemExit(f"the {role} poller did not start")
    meter = CpuMeter({role: child.pid}).start()
    started = time.monotonic()
    result = child.stdout.readline().split()
    wall = time.monotonic() - started
    cpu = meter.stop()[role]
    child.wait(timeout=30)
    return cpu / wall * 100, cpu, int(result[1]), int(result[3])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=32)
    parser.add_argument("--interval", type=float, default=10.0, help="poll interval, s")
    parser.add_argument("--seconds", type=float, default=60.0, help="each poller runs this long")
    parser.add_argument("--role", choices=("bench", "serve", "agent", "bare"), default="bench")
    parser.add_argument("--path", type=Path)
    args = parser.parse_args(argv)
    if args.role == "serve":
        asyncio.run(serve(args.path, args.devices))
        return
    if args.role in ("agent", "bare"):
        poller = poll_agent if args.role == "agent" else poll_bare
        asyncio.run(poller(args.path, args.devices, args.interval, args.seconds))
        return

    with Run().reported() as run, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ttyRS485"
        server = _child("serve", path, args)
        assert server.stdout is not None and server.stdin is not None
        if server.stdout.readline().strip() != "ready":
            raise SystemExit("the simulated bus did not start")
        expected = args.devices * max(1, int(args.seconds / args.interval))
        print(
            f"{args.devices} devices on one RTU bus (pty), polled every {args.interval:g} s"
            f" for {args.seconds:g} s each"
        )
        figures = {}
        for role, label in (("agent", "agent ModbusBus"), ("bare", "bare pymodbus loop")):
            percent, cpu, answered, failed = _measure(role, path, args)
            figures[role] = percent
            per_thousand = cpu * 1e6 / max(answered, 1)
            print(
                f"{label}: {percent:.3f} % of a core, {answered} polls answered, {failed} failed"
                f" ({per_thousand:.1f} ms CPU per 1,000 polls)"
            )
            run.failures.add(f"{role} polls failed", failed)
            if answered < expected:
                run.failures.add(f"{role} polls missing", expected - answered)
        ratio = figures["agent"] / figures["bare"] if figures["bare"] > 0 else float("inf")
        print(f"ratio agent / bare pymodbus: {ratio:.2f}")
        target = "met" if figures["agent"] < 2.0 else "NOT met"
        print(f"target < 2 % of a core: {target}")
        server.stdin.close()
        log = server.stdout.readline().split()
        server.wait(timeout=30)
        requests, overlaps = int(log[1]), int(log[3])
        print(f"server request log: {requests} requests, {overlaps} overlapping on the wire")
        run.failures.add("requests overlapping on the wire", overlaps)


if __name__ == "__main__":
    main()
