"""Run simulated MQTT devices against a broker: ``python -m agent.devices.simulator --help``.

Examples::

    python -m agent.devices.simulator --port 1883                  # one device per MQTT profile
    python -m agent.devices.simulator --count 50 --period 2        # 50 devices, round-robin
    python -m agent.devices.simulator --device tasmota-sht3x:growroom-1 --device esphome-fan:exhaust

Each device is printed as ``<profile> <topic base>`` so it can be registered with the agent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import signal
import sys
from pathlib import Path

from agent.devices.errors import ProfileError
from agent.devices.profiles import ProfileRegistry, load_profiles
from agent.devices.simulator.mqtt import SimulatedMqttDevice

DEFAULT_PROFILES = Path(__file__).resolve().parents[2] / "firmware_profiles"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agent.devices.simulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="broker host (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=1883, help="broker port (default 1883)")
    parser.add_argument("--profiles", type=Path, default=DEFAULT_PROFILES, help="profile dir")
    parser.add_argument(
        "--device",
        action="append",
        default=[],
        metavar="PROFILE:BASE",
        help="a device to simulate (repeatable)",
    )
    parser.add_argument("--count", type=int, default=0, help="N devices across all MQTT profiles")
    parser.add_argument(
        "--period", type=float, default=5.0, help="seconds between telemetry (default 5)"
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def _devices(args: argparse.Namespace, profiles: ProfileRegistry) -> list[tuple[str, str]]:
    chosen: list[tuple[str, str]] = []
    for spec in args.device:
        profile_id, _, base = spec.partition(":")
        if profile_id not in profiles or not base:
            raise SystemExit(f"--device {spec!r}: expected PROFILE:BASE with a known profile")
        chosen.append((profile_id, base))
    mqtt_profiles = [pid for pid in profiles if profiles[pid].transport == "mqtt"]
    count = args.count or (0 if chosen else len(mqtt_profiles))
    for i in range(count):
        profile_id = mqtt_profiles[i % len(mqtt_profiles)]
        chosen.append((profile_id, f"sim-{profile_id}-{i // len(mqtt_profiles) + 1}"))
    return chosen


async def _run(args: argparse.Namespace) -> int:
    try:
        profiles = load_profiles(args.profiles)
    except ProfileError as err:
        print(f"invalid firmware profile: {err}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    devices = [
        SimulatedMqttDevice(
            profiles[profile_id],
            base,
            host=args.host,
            port=args.port,
            period=args.period,
            rng=random.Random(rng.random()),
        )
        for profile_id, base in _devices(args, profiles)
    ]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    for device in devices:
        await device.start()
        print(f"{device.profile.id} {device.base}", flush=True)
    print(f"simulating {len(devices)} devices on {args.host}:{args.port}", file=sys.stderr)
    try:
        await stop.wait()
    finally:
        for device in devices:
            with contextlib.suppress(Exception):
                await device.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    args = _parse(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return asyncio.run(_run(args))


if __name__ == "__main__":
    raise SystemExit(main())
