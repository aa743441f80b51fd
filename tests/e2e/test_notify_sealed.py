"""A contact point's URL leaves the agent only sealed to the cloud: the agent's database (every
table, its WAL too) and the batches it posts never hold it in clear, whether the contact point
was made before the agent was paired or after; the cloud opens it and still tells it when the
farm goes silent."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from agent.web.keys import SYNC
from cloud.web.keys import SILENCE_WATCH
from cloud.web.keys import SYNC as CLOUD_SYNC
from tests.agent.devices_api.conftest import create_farm
from tests.agent.notify.conftest import add_contact
from tests.conftest import AgentFactory
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, eventually, paired_state
from tests.support.ntfy_receiver import NtfyReceiver


@pytest.fixture
def cloud_overrides() -> dict[str, Any]:
    """The watch looks only when the test makes it."""
    return {"notify_poll_s": 300.0, "notify_silent_after_s": 600.0}


def _state_bytes(state: Path) -> bytes:
    """Every file of the agent's state directory: the database, its WAL, keys, the link."""
    return b"".join(path.read_bytes() for path in sorted(state.rglob("*")) if path.is_file())


async def test_a_contact_points_url_reaches_the_cloud_only_sealed(
    cloud: LiveCloud, make_agent: AgentFactory, tmp_path: Path, ntfy: NtfyReceiver
) -> None:
    bodies: list[bytes] = []
    service = cloud.runner.app[CLOUD_SYNC] if cloud.runner else None
    assert service is not None
    apply = service.apply

    async def recording(agent: str | None, signature: str | None, body: bytes) -> Any:
        bodies.append(gzip.decompress(body))
        return await apply(agent, signature, body)

    service.apply = recording  # type: ignore[method-assign]

    agent = await make_agent(**FAST_SYNC)  # not paired yet
    farm_id = await create_farm(agent, "North")
    before = await add_contact(agent, farm_id, ntfy.url("before-pairing-7f3a"))
    state = tmp_path / "state"
    await paired_state(cloud, state)

    async def mirrored(count: int) -> bool:
        rows = await cloud.sql("SELECT id FROM contact_points")
        return len(rows) == count

    await eventually(lambda: mirrored(1), "the contact point made before pairing in the cloud")
    after = await add_contact(agent, farm_id, ntfy.url("after-pairing-9c1d"))
    await eventually(lambda: mirrored(2), "the contact point made after pairing in the cloud")

    secrets = [b"before-pairing-7f3a", b"after-pairing-9c1d"]
    held = _state_bytes(state)
    assert all(secret not in held for secret in secrets)
    posted = b"".join(bodies)
    assert b'"url_sealed"' in posted and b"contact_points" in posted
    assert all(secret not in posted for secret in secrets)
    assert b'"url":' not in posted

    # The farm goes silent: the cloud opened each URL and tells both.
    await agent.client.app[SYNC].stop()
    await cloud.sql("UPDATE agents SET last_seen_at = now() - interval '11 minutes'")
    [silence] = await cloud.runner.app[SILENCE_WATCH].run_once()  # type: ignore[union-attr]
    assert silence.back_at is None
    got = await ntfy.wait_for(lambda got: len(got) >= 2)
    assert sorted(message.topic for message in got) == ["after-pairing-9c1d", "before-pairing-7f3a"]
    assert all("has been silent since" in message.message for message in got)
    mirror = await cloud.sql("SELECT id, url_sealed FROM contact_points")
    assert {str(row["id"]) for row in mirror} == {before["id"], after["id"]}
    assert all(secret not in bytes(row["url_sealed"]) for row in mirror for secret in secrets)
