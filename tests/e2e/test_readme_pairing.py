"""The README's pairing steps, pasted as written after ``scripts/demo`` and ``scripts/cloud``:
the code is made in the cloud, the demo's running agent is paired by ``.venv/bin/farm-agent``
from the clone's directory, and the demo's farm reaches the cloud."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import CLOUD_PASSWORD, LiveCloud
from tests.e2e.helpers import eventually
from tests.support.agent_process import AgentProcess

ROOT = Path(__file__).resolve().parents[2]


def _pairing_blocks() -> list[str]:
    """The shell blocks of the README's "Pairing with the cloud" section, in order."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Pairing with the cloud\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.DOTALL)


async def _paste(block: str, cloud: LiveCloud, cwd: Path, **placeholders: str) -> str:
    """Run ``block`` as a user pasting it into bash in ``cwd``; its output. (The cloud serves
    on this test's event loop: the shell runs beside it.)"""
    for address in ("localhost:8000", "127.0.0.1:8000"):
        block = block.replace(address, f"127.0.0.1:{cloud.port}")
    for name, value in placeholders.items():
        block = block.replace(f"<{name.replace('_', ' ')}>", value).replace(f"<{name}>", value)
    env = {key: value for key, value in os.environ.items() if not key.startswith("FARM_")}
    shell = await asyncio.create_subprocess_exec(
        "bash", "-euo", "pipefail", "-c", block,
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await shell.communicate()
    assert shell.returncode == 0, (block, out, err)
    return out.decode()


async def test_the_readme_pairs_the_running_demo_with_the_cloud(
    cloud: LiveCloud, tmp_path: Path
) -> None:
    await cloud.add_user("admin", "admin@cloud.local")
    clone = tmp_path / "clone"
    clone.mkdir()
    # What scripts/demo leaves in a clone: .venv/bin/farm-agent, and the agent on ./state-demo.
    (clone / ".venv").symlink_to(Path(sys.executable).parent.parent)
    demo = AgentProcess(
        clone / "state-demo",
        {
            "FARM_MQTT_ENABLED": "false",
            "FARM_SERIAL_ENABLED": "false",
            "FARM_SYNC_INTERVAL_S": "0.2",
            "FARM_SYNC_HEARTBEAT_S": "0.5",
        },
        args=("--sample-data",),
    )
    await demo.start()
    try:
        make_code, pair = _pairing_blocks()
        created = json.loads(await _paste(make_code, cloud, clone, printed_password=CLOUD_PASSWORD))
        out = await _paste(pair, cloud, clone, pairing_code=created["pairing_code"])
        assert "Paired with" in out

        async def synced() -> bool:
            rows = await cloud.sql("SELECT count(*) FROM farms WHERE name = 'Greenhouse One'")
            return int(rows[0][0]) == 1

        await eventually(synced, "the demo's sample farm reaches the cloud")
    finally:
        demo.stop()
    assert not (clone / "state").exists()  # nothing paired a state no agent runs on


def test_pair_refuses_a_directory_without_an_agent_and_names_the_one_here(
    tmp_path: Path,
) -> None:
    """Run as the README once wrote it (no --state-dir) after the demo: no new ./state is made
    and paired, the code is not used, and the message says which directory to name."""
    (tmp_path / "state-demo").mkdir()
    (tmp_path / "state-demo" / "agent.db").touch()
    env = {key: value for key, value in os.environ.items() if not key.startswith("FARM_")}
    done = subprocess.run(
        [sys.executable, "-m", "agent", "pair", "--cloud", "http://127.0.0.1:9", "--code",
         "one-time-code"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert "no agent state in" in done.stderr
    assert "--state-dir state-demo" in done.stderr
    assert not (tmp_path / "state").exists()
