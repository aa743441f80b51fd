"""The install path of a Pi: `python -m build` makes a wheel and an sdist; the wheel installs
into a fresh virtual environment and runs (`farm-agent --version`, the API, `install`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.support.mosquitto import free_port

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str | Path, timeout: float = 600) -> str:
    result = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result.stdout


def test_the_wheel_installs_into_a_fresh_venv_and_serves(tmp_path):
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "build", "--outdir", dist, ROOT)
    (wheel,) = dist.glob("vertical_farm-*.whl")
    (sdist,) = dist.glob("vertical_farm-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[-1] for name in archive.getnames()}
    # docs/operations.md installs the broker's settings from the sdist's systemd/ folder.
    assert {"systemd/mosquitto-farm.conf", "systemd/farm-agent.service"} <= names

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin/pip", "install", "-q", wheel)
    farm_agent = venv / "bin/farm-agent"
    version = run(farm_agent, "--version").strip()
    assert (
        version
        == run(
            sys.executable, "-c", "import protocol.version as v; print(v.distribution_version())"
        ).strip()
    )

    # The unit file ships in the wheel: install renders it into a directory tree.
    run(farm_agent, "install", "--root", tmp_path / "root")
    unit = (tmp_path / "root/etc/systemd/system/farm-agent.service").read_text()
    assert f"ExecStart={farm_agent} run" in unit and "WatchdogSec=" in unit

    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "FARM_STATE_DIR": str(tmp_path / "state"),
        "FARM_HOST": "127.0.0.1",
        "FARM_PORT": str(port),
        "FARM_MQTT_ENABLED": "false",
        "FARM_SERIAL_ENABLED": "false",
        "FARM_ADMIN_EMAIL": ADMIN_EMAIL,
        "FARM_ADMIN_PASSWORD": ADMIN_PASSWORD,
        # No FARM_PROFILES_DIR: the firmware profiles ship inside the package.
    }
    with subprocess.Popen(
        [farm_agent, "run"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as agent:
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60  # a hung start fails instead of stalling
            while True:
                assert agent.poll() is None, agent.stderr.read() if agent.stderr else ""
                try:
                    with urllib.request.urlopen(base + "/health", timeout=5) as resp:
                        assert json.loads(resp.read())["version"] == version
                        break
                except OSError:
                    assert time.monotonic() < deadline, "the installed agent did not answer"
                    time.sleep(0.2)
            login = json.dumps({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}).encode()
            request = urllib.request.Request(
                base + "/api/v1/login", data=login, headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=10) as resp:
                assert "access_token" in json.loads(resp.read())
        finally:
            agent.send_signal(signal.SIGTERM)
            assert agent.wait(30) == 0
