"""Starting the agent as a new user does: the URLs printed are the ones served, once they are
open; a busy port, a bad setting or a resource that does not open is one line and a non-zero
exit, never a traceback or a hang (tests/test_packaging.py starts an installed wheel)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.http.server import served_urls
from tests.conftest import ADMIN_PASSWORD

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "FARM_STATE_DIR": str(tmp_path / "state"),
        "FARM_MQTT_ENABLED": "false",
        "FARM_SERIAL_ENABLED": "false",
        "FARM_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "FARM_LOG_LEVEL": "WARNING",
        **extra,
    }


def _run_to_exit(
    env: dict[str, str], *args: str, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """``farm-agent run`` expected to fail: it must exit by itself (the timeout is a hang)."""
    return subprocess.run(
        [sys.executable, "-m", "agent", "run", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _assert_one_line_failure(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("farm-agent: "), result.stderr
    for word in words:
        assert word in last, last
    assert "listening" not in result.stdout


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], list[str], int]]:
    """``farm-agent run`` on 127.0.0.1: the process, the lines up to the docs URL, the port."""
    port = _free_port()
    env = _env(tmp_path, FARM_HOST="127.0.0.1", FARM_PORT=str(port))
    with subprocess.Popen(
        [sys.executable, "-m", "agent", "run"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as agent:
        try:
            assert agent.stdout is not None
            lines: list[str] = []
            for line in agent.stdout:
                lines.append(line.rstrip("\n"))
                if line.startswith("Farm agent listening on"):
                    # Printed only once the socket is open: connecting succeeds right now.
                    socket.create_connection(("127.0.0.1", port), timeout=5).close()
                if line.startswith("API docs:"):
                    break
            yield agent, lines, port
        finally:
            agent.send_signal(signal.SIGTERM)
            agent.wait(30)


def test_the_agent_prints_the_url_it_serves_once_it_is_open(
    started: tuple[subprocess.Popen[str], list[str], int],
) -> None:
    _, lines, port = started
    assert f"Farm agent listening on http://127.0.0.1:{port}/" in lines
    assert lines[-1] == f"API docs: http://127.0.0.1:{port}/api/v1/docs"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as resp:
        assert resp.status == 200


def test_a_wildcard_address_is_shown_as_this_machines_addresses() -> None:
    urls = served_urls([("0.0.0.0", 8080)])
    assert urls[0] == "http://127.0.0.1:8080/"
    assert not any("0.0.0.0" in url for url in urls)


def test_a_busy_port_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _run_to_exit(_env(tmp_path, FARM_HOST="127.0.0.1", FARM_PORT=str(port)))
    _assert_one_line_failure(result, "cannot listen", str(port))


@pytest.mark.parametrize(
    ("variable", "value"),
    [("FARM_TIMEZONE", "Mars/Olympus_Mons"), ("FARM_PORT", "eighty"), ("FARM_LOG_LEVEL", "LOUD")],
)
def test_a_bad_setting_is_one_line_naming_it(tmp_path: Path, variable: str, value: str) -> None:
    result = _run_to_exit(_env(tmp_path, **{variable: value}))
    _assert_one_line_failure(result, variable)


def test_a_failed_start_up_exits_at_once(tmp_path: Path) -> None:
    result = _run_to_exit(
        _env(
            tmp_path,
            FARM_HOST="127.0.0.1",
            FARM_PORT=str(_free_port()),
            FARM_PROFILES_DIR=str(tmp_path / "no-such-dir"),
        )
    )
    _assert_one_line_failure(result, "start-up failed")
