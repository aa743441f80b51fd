"""The agent tells systemd it is ready, alive, and stopping, and stops pinging when stuck."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.app import create_app
from agent.ops.serve import serve
from agent.ops.systemd_notify import Notifier, notifier_from_environment, watchdog_interval
from agent.web.keys import HEALTH, READINGS
from tests.agent.ops.notify_listener import NotifyListener
from tests.conftest import ADMIN_PASSWORD, agent_settings

WATCHDOG_USEC = 200_000  # pings every 0.1 s


@pytest.fixture
def listener(tmp_path):
    found = NotifyListener(tmp_path)
    yield found
    found.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_farm_agent_run_notifies_ready_watchdog_and_stopping(tmp_path, listener):
    env = {
        **os.environ,
        "NOTIFY_SOCKET": str(listener.path),
        "WATCHDOG_USEC": str(WATCHDOG_USEC),
        "FARM_STATE_DIR": str(tmp_path / "state"),
        "FARM_HOST": "127.0.0.1",
        "FARM_PORT": str(_free_port()),
        "FARM_MQTT_ENABLED": "false",
        "FARM_SERIAL_ENABLED": "false",
        "FARM_ADMIN_PASSWORD": ADMIN_PASSWORD,
    }
    with subprocess.Popen(
        [sys.executable, "-m", "agent", "run"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as agent:
        try:
            ready = listener.wait_for("READY", "1")
            assert listener.messages[ready]["STATUS"].startswith("Serving")
            first = listener.wait_for("WATCHDOG", "1", after=ready)
            listener.wait_for("WATCHDOG", "1", after=first + 1)  # periodic, not once
            agent.send_signal(signal.SIGTERM)
            stopping = listener.wait_for("STOPPING", "1", after=ready)
            assert agent.wait(30) == 0
            assert "STATUS" in listener.messages[stopping]
        finally:
            if agent.poll() is None:
                agent.kill()


def test_the_watchdog_is_off_without_systemd_and_when_meant_for_another_process():
    assert watchdog_interval({}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "30000000"}) == 15.0
    other = {"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid() + 1)}
    assert watchdog_interval(other) is None
    assert not notifier_from_environment({}).enabled


async def _serving(tmp_path: Path, listener: NotifyListener):
    """Serve an agent in this loop with a fast watchdog; returns (task, app)."""
    app = create_app(agent_settings(tmp_path / "state"))
    notifier = Notifier(str(listener.path))
    task = asyncio.create_task(
        serve(
            app,
            host="127.0.0.1",
            port=0,
            notifier=notifier,
            watchdog_s=WATCHDOG_USEC / 2_000_000,
            problem=lambda: app[HEALTH].problem(),
            status=lambda: app[HEALTH].summary(),
        )
    )
    await asyncio.to_thread(listener.wait_for, "READY", "1")
    return task, app, notifier


async def _stop(task: asyncio.Task[None], notifier: Notifier) -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # serve() handles it: a graceful stop
    await asyncio.wait_for(task, 30)
    notifier.close()


async def test_pings_stop_while_the_event_loop_is_blocked(tmp_path, listener):
    task, _, notifier = await _serving(tmp_path, listener)
    await asyncio.to_thread(listener.wait_for, "WATCHDOG", "1")
    # Mark the start and end of a block of five watchdog intervals, from the loop itself.
    notifier.send(test_mark="blocked")
    time.sleep(5 * WATCHDOG_USEC / 1_000_000)  # noqa: ASYNC251 - the point of the test
    notifier.send(test_mark="unblocked")
    start = await asyncio.to_thread(listener.wait_for, "TEST_MARK", "blocked")
    end = await asyncio.to_thread(listener.wait_for, "TEST_MARK", "unblocked", after=start)
    assert not [m for m in listener.messages[start:end] if "WATCHDOG" in m]
    await asyncio.to_thread(listener.wait_for, "WATCHDOG", "1", after=end)  # and resume
    await _stop(task, notifier)


async def test_a_dead_reading_writer_stops_the_pings_and_says_why(tmp_path, listener):
    task, app, notifier = await _serving(tmp_path, listener)
    await app[READINGS].writer.stop()
    said = await asyncio.to_thread(listener.wait_for, "STATUS", after=0)
    said = await asyncio.to_thread(_status_containing, listener, "reading writer stopped", said)
    seen = len(listener.messages)
    await asyncio.sleep(5 * WATCHDOG_USEC / 1_000_000)
    assert not [m for m in listener.messages[said:] if "WATCHDOG" in m]
    assert len(listener.messages) == seen  # the line is said once, not every interval
    await _stop(task, notifier)


def _status_containing(listener: NotifyListener, text: str, after: int) -> int:
    while True:
        index = listener.wait_for("STATUS", after=after)
        if text in listener.messages[index]["STATUS"]:
            return index
        after = index + 1
