"""Every golden command of the zigbee2mqtt and Shelly actuator profiles, sent through the API
to a simulated device on the broker, is confirmed by the state the device reports back."""

from __future__ import annotations

import pytest

from tests.agent.control.conftest import Rig
from tests.agent.runtime.conftest import PROFILES

ON: dict[str, bool | int] = {"power": True, "valve": True, "brightness": 100}
CASES = [
    (profile_id, kind, golden.command, golden.value, dict(golden.expect_state))
    for profile_id, kind in (
        ("zigbee2mqtt-plug", "pump"),
        ("zigbee2mqtt-light", "light"),
        ("shelly-switch", "valve"),
    )
    for golden in PROFILES[profile_id].golden_commands
    if golden.command in ("power", "valve", "brightness")
    and (golden.command != "valve" or kind == "valve")
]


@pytest.mark.parametrize(("profile_id", "kind", "command", "value", "expected"), CASES)
async def test_a_command_is_confirmed_by_the_devices_own_report(
    rig: Rig,
    profile_id: str,
    kind: str,
    command: str,
    value: bool | int,
    expected: dict[str, object],
) -> None:
    base = f"zigbee2mqtt/{kind}_1" if profile_id.startswith("zigbee2mqtt") else "shellyplus1-abc"
    device_id = await rig.actuator(kind, profile_id, base)
    async with rig.simulator(profile_id, base) as sim:
        await sim.wait_ready(10)
        await rig.online(device_id)
        if value in (False, 0):  # start from on, so that off is a change the device reports
            sim.state.update({k: v for k, v in ON.items() if k in sim.state})
        resp = await rig.agent.client.post(
            f"/api/v1/devices/{device_id}/commands",
            json={"kind": command, "value": value},
            headers=rig.agent.auth(),
        )
        record = await resp.json()
        assert resp.status == 200, record
        assert record["outcome"] == "confirmed", record
        assert {key: record["observed"][key] for key in expected} == expected
