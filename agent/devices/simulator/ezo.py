"""A simulated Atlas Scientific EZO pH or EC circuit on a pseudo-terminal.

It speaks the UART protocol of the datasheets (commands are case-insensitive, replies end with
<CR>, `*OK` follows every accepted command while response codes are on, `*ER` answers unknown
commands and bad arguments) and keeps its own calibration state. Tests and demos inject faults:
answer `*ER` to a chosen command, stay silent, or unplug and replug the adapter.

Run standalone:  python -m agent.devices.simulator.ezo --kind ph --link /tmp/ttyEZO-ph
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent.devices.simulator.ezo_model import EcModel, PhModel
from agent.devices.simulator.pty_link import PtyLink
from farmkit.tasks import cancel_and_wait

__all__ = ["EzoSimulator"]

logger = logging.getLogger(__name__)

Kind = Literal["ph", "ec"]


@dataclass
class _Fault:
    prefix: str
    action: Literal["reject", "ignore", "hold"]
    remaining: int | None


class EzoSimulator:
    """An EZO circuit served on a pty whose slave device is reachable at `path`."""

    def __init__(
        self,
        kind: Kind,
        path: Path,
        *,
        rng: random.Random | None = None,
        firmware: str = "2.16",
        response_delay: float = 0.0,
        continuous: bool = True,
        continuous_period: float = 1.0,
    ) -> None:
        self.kind = kind
        self.firmware = firmware
        self.response_delay = response_delay
        self.continuous = continuous
        self.continuous_period = continuous_period
        self.response_codes = True
        rng = rng or random.Random()
        self.ph = PhModel(rng)
        self.ec = EcModel(rng)
        self.received: list[str] = []
        self._arrived = asyncio.Event()
        self.max_queued = 0
        self._faults: list[_Fault] = []
        self._held: list[str] = []
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._link = PtyLink(path, self._on_line)
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def path(self) -> Path:
        """The stable path the agent opens (a symlink to the current pty)."""
        return self._link.path

    @property
    def tty_path(self) -> str | None:
        """The current /dev/pts/N, or None while unplugged."""
        return self._link.tty_path

    async def start(self) -> None:
        """Plug in and start answering."""
        self._link.plug()
        self._tasks = [
            asyncio.create_task(self._serve(), name="ezo-sim serve"),
            asyncio.create_task(self._emit_continuous(), name="ezo-sim continuous"),
        ]

    async def stop(self) -> None:
        """Stop answering and remove the pty."""
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        self._link.unplug()

    async def __aenter__(self) -> EzoSimulator:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def unplug(self) -> None:
        """Pull the adapter out: the pty closes and `path` disappears."""
        self._link.unplug()
        while not self._queue.empty():
            self._queue.get_nowait()

    def replug(self) -> None:
        """Plug the adapter back in at the same `path` (a new pty underneath)."""
        self._link.plug()

    def reject(self, command: str, times: int | None = 1) -> None:
        """Answer *ER to commands starting with `command` (case-insensitive); None = always."""
        self._faults.append(_Fault(command.lower(), "reject", times))

    def ignore(self, command: str, times: int | None = 1) -> None:
        """Stay silent on commands starting with `command`, as if the line were lost."""
        self._faults.append(_Fault(command.lower(), "ignore", times))

    def hold(self, command: str, times: int | None = 1) -> None:
        """Keep the reply to commands starting with `command` until `release()` (a slow device)."""
        self._faults.append(_Fault(command.lower(), "hold", times))

    def release(self) -> None:
        """Send the replies held back by `hold()` now."""
        held, self._held = self._held, []
        for line in held:
            self._reply(self._handle(line))

    def clear_faults(self) -> None:
        """Answer normally again."""
        self._faults.clear()

    async def wait_for_command(self, prefix: str, within: float = 5.0) -> None:
        """Wait until a command starting with `prefix` has arrived (TimeoutError otherwise)."""
        async with asyncio.timeout(within):
            while not any(c.lower().startswith(prefix.lower()) for c in self.received):
                self._arrived.clear()
                await self._arrived.wait()

    def _on_line(self, line: str) -> None:
        self.received.append(line)
        self._arrived.set()
        self._queue.put_nowait(line)
        # A real circuit works through one command at a time; more than one waiting means the
        # agent sent a command before the previous reply was complete.
        self.max_queued = max(self.max_queued, self._queue.qsize())

    async def _serve(self) -> None:
        while True:
            line = await self._queue.get()
            if self.response_delay:
                await asyncio.sleep(self.response_delay)
            fault = self._take_fault(line)
            if fault == "hold":
                self._held.append(line)
            elif fault == "reject":
                self._reply(["*ER"])
            elif fault is None:
                self._reply(self._handle(line))
            self._queue.task_done()

    def _reply(self, lines: list[str]) -> None:
        for line in lines:
            if line.startswith("*") and not self.response_codes:
                continue
            self._link.write_line(line)

    async def _emit_continuous(self) -> None:
        # Datasheet, "C" command: in UART mode the circuit reads continuously (C,1) by default.
        while True:
            await asyncio.sleep(self.continuous_period)
            if self.continuous and self._link.plugged:
                self._link.write_line(self._reading())

    def _take_fault(self, line: str) -> str | None:
        lowered = line.lower()
        for fault in self._faults:
            if lowered.startswith(fault.prefix):
                if fault.remaining is not None:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                return fault.action
        return None

    def _reading(self) -> str:
        if self.kind == "ph":
            return f"{self.ph.reading():.3f}"
        return ",".join(self.ec.reading_fields())

    def _handle(self, line: str) -> list[str]:
        """Reply lines for one command, status line included."""
        parts = line.split(",")
        name, args = parts[0].lower(), [a.strip() for a in parts[1:]]
        try:
            data = self._dispatch(name, args)
        except (ValueError, IndexError):
            return ["*ER"]
        if data is None:
            return ["*ER"]
        return [*data, "*OK"]

    def _dispatch(self, name: str, args: list[str]) -> list[str] | None:
        query = args == ["?"]
        device = "pH" if self.kind == "ph" else "EC"
        if name == "r" and not args:
            return [self._reading()]
        if name == "i" and not args:
            return [f"?i,{device},{self.firmware}"]
        if name == "status" and not args:
            return ["?Status,P,5.038"]
        if name == "t":
            model = self.ph if self.kind == "ph" else self.ec
            if query:
                return [f"?T,{model.compensation_c:.2f}"]
            model.compensation_c = float(args[0])
            return []
        if name == "c":
            if query:
                return [f"?C,{int(self.continuous)}"]
            self.continuous = args[0] != "0"
            return []
        if name in ("*ok", "response"):
            # "*OK,n" in firmware 2.x, "RESPONSE,n" in older firmware (datasheet, response codes).
            if query:
                return [f"?{name.upper()},{int(self.response_codes)}"]
            self.response_codes = args[0] == "1"
            return []
        if name == "cal":
            return self._calibrate(args)
        if self.kind == "ph" and name == "slope" and query:
            acid, base, offset = self.ph.slope()
            return [f"?Slope,{acid:.1f},{base:.1f},{offset:.2f}"]
        if self.kind == "ec":
            return self._dispatch_ec(name, args)
        return None

    def _dispatch_ec(self, name: str, args: list[str]) -> list[str] | None:
        if name == "k":
            if args == ["?"]:
                return [f"?K,{self.ec.probe_k:.1f}"]
            k = float(args[0])
            if not 0.1 <= k <= 10.0:
                return None
            self.ec.probe_k = k
            return []
        if name == "o":
            if args == ["?"]:
                return ["?O," + ",".join(self.ec.outputs) if self.ec.outputs else "?O,No output"]
            field, enabled = args[0].upper(), args[1] == "1"
            if field not in ("EC", "TDS", "S", "SG"):
                return None
            kept = [f for f in ("EC", "TDS", "S", "SG") if f in self.ec.outputs or f == field]
            self.ec.outputs = [f for f in kept if f != field or enabled]
            return []
        return None

    def _calibrate(self, args: list[str]) -> list[str] | None:
        model = self.ph if self.kind == "ph" else self.ec
        what = args[0].lower()
        if what == "?":
            return [f"?CAL,{model.points}"]
        if what == "clear":
            model.clear()
            return []
        if self.kind == "ph":
            if what in ("mid", "low", "high") and len(args) == 2:
                return [] if self.ph.calibrate(what, float(args[1])) else None
            return None
        if what == "dry" and len(args) == 1:
            return [] if self.ec.calibrate("dry", None) else None
        if what in ("low", "high") and len(args) == 2:
            return [] if self.ec.calibrate(what, float(args[1])) else None
        if len(args) == 1:  # Cal,n: single-point calibration
            return [] if self.ec.calibrate("single", float(what)) else None
        return None


async def _main(kind: Kind, link: Path) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with EzoSimulator(kind, link, response_delay=0.3) as sim:
        logger.warning("EZO %s simulator at %s -> %s", kind, sim.path, sim.tty_path)
        await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=["ph", "ec"], default="ph")
    parser.add_argument("--link", type=Path, required=True, help="symlink path to create")
    options = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    asyncio.run(_main(options.kind, options.link))
