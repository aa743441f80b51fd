"""The simulated agent (tests/support/sim_agent.py) costs the cloud what a real agent does: it
sends the identity version it holds, so the cloud answers the identity delta only when it has a
newer one (the fleet bench's agents used to ask for the whole delta with every batch)."""

from __future__ import annotations

import aiohttp

from tests.cloud.api.conftest import Cloud, World
from tests.cloud.api.test_several_processes import _paired


async def test_the_simulated_agent_holds_the_identity_it_was_answered(
    cloud: Cloud, world: World
) -> None:
    agent = await _paired(cloud, world)  # its first batch was answered with the delta
    assert agent.identity_version > 0
    base = str(cloud.client.make_url("")).rstrip("/")
    async with aiohttp.ClientSession() as session:
        batch = agent.sign(agent.reading_records(1_700_000_000_000, 2, 10_000), readings=6)
        status, ack = await agent.post(session, base, batch)
    assert status == 200 and ack["acked_seq"] == batch.last_seq
    assert ack.get("identity") is None  # nothing newer than what it holds
