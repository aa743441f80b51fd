"""The cloud's watch of silent farms: the contact points an agent syncs, their URL sealed to the
cloud's sealing key, are kept with their URL sealed under the cloud's own key; when the agent
has sent nothing for the configured time its farm's contact points are told once (however many
cloud processes watch), and again when it is back, with how long it was gone. A URL that does
not open for its contact point is refused."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from cloud.web.keys import SILENCE_WATCH
from farmkit.sealing import seal_to, verified_sealing_key
from protocol.jwk import public_key_from_jwk
from tests.cloud.api.conftest import Cloud, Conn, World
from tests.cloud.api.test_several_processes import _paired
from tests.support.ntfy_receiver import NtfyReceiver
from tests.support.sim_agent import SimAgent

# The loop of each process looks rarely; the test makes each look itself.
QUIET = {"notify_poll_s": 300.0, "notify_silent_after_s": 600.0}


@pytest.fixture
async def ntfy() -> AsyncIterator[NtfyReceiver]:
    receiver = NtfyReceiver()
    await receiver.start()
    yield receiver
    await receiver.stop()


async def _send(cloud: Cloud, agent: SimAgent, records: list[Any]) -> dict[str, Any]:
    base = str(cloud.client.make_url("")).rstrip("/")
    async with aiohttp.ClientSession() as session:
        status, ack = await agent.post(session, base, agent.sign(records))
    assert status == 200 and ack["rejected"] == 0, ack
    return ack


async def _sealing_key(cloud: Cloud) -> X25519PublicKey:
    """The cloud's sealing key, checked as an agent checks it: signed by the token key."""
    resp = await cloud.client.get("/api/v1/agents/sealing-key")
    assert resp.status == 200, await resp.text()
    answer = await resp.json()
    [jwk] = (await (await cloud.client.get("/.well-known/jwks.json")).json())["keys"]
    return verified_sealing_key(answer["key"], answer["signature"], public_key_from_jwk(jwk))


def _contact(agent: SimAgent, url: str, key: X25519PublicKey, **fields: Any) -> Any:
    contact_id = str(uuid.uuid4())
    data = {
        "id": contact_id,
        "farm_id": agent.farm_id,
        "name": "night phone",
        "service": url.split(":", 1)[0],
        "url_sealed": seal_to(key, url, fields.pop("sealed_for", contact_id)),
        "quiet_start": None,
        "quiet_end": None,
        "enabled": True,
        **fields,
    }
    return agent.record("contact_points", contact_id, data)


async def test_a_silent_farm_is_told_once_by_several_processes_and_again_when_back(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World, system: Conn, ntfy: NtfyReceiver
) -> None:
    one = await make_cloud(**QUIET)
    two = await make_cloud(**QUIET)
    agent = await _paired(one, world)
    await _send(one, agent, [_contact(agent, ntfy.url("grower"), await _sealing_key(two))])
    sealed = await system.fetchval("SELECT url_sealed FROM contact_points")
    assert sealed is not None and b"grower" not in bytes(sealed)

    watches = [one.client.app[SILENCE_WATCH], two.client.app[SILENCE_WATCH]]
    assert [await w.run_once() for w in watches] == [[], []]  # not silent yet
    await system.execute(
        "UPDATE agents SET last_seen_at = now() - interval '11 minutes' WHERE id = $1::uuid",
        agent.agent_id,
    )
    for _ in range(2):
        noticed = await asyncio.gather(*(w.run_once() for w in watches))
        assert sum(len(n) for n in noticed) <= 1
    [silent] = await ntfy.wait_for(lambda got: len(got) >= 1)
    farm = f"Farm {agent.agent_id[:8]}"
    assert f"{farm} has been silent since" in silent.message
    assert "power, network or the agent" in silent.message

    await _send(one, agent, [])  # the agent is back: a batch with nothing in it
    for _ in range(2):
        await asyncio.gather(*(w.run_once() for w in watches))
    await ntfy.wait_for(lambda got: len(got) >= 2)
    back = ntfy.received[1]
    assert f"{farm} is back" in back.message and "(11 min)" in back.message
    for _ in range(2):
        await asyncio.gather(*(w.run_once() for w in watches))
    assert len(ntfy.received) == 2  # each once, with two processes looking
    rows = await system.fetch("SELECT kind, status, attempts FROM cloud_notifications")
    assert sorted((r["kind"], r["status"], r["attempts"]) for r in rows) == [
        ("farm_back", "sent", 1),
        ("farm_silent", "sent", 1),
    ]


async def test_a_contact_point_deleted_or_disabled_on_the_agent_is_not_told(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World, system: Conn, ntfy: NtfyReceiver
) -> None:
    cloud = await make_cloud(**QUIET)
    agent = await _paired(cloud, world)
    key = await _sealing_key(cloud)
    gone = _contact(agent, ntfy.url("gone"), key)
    off = _contact(agent, ntfy.url("off"), key, enabled=False)
    await _send(cloud, agent, [gone, off])
    assert await system.fetchval("SELECT count(*) FROM contact_points") == 2
    deleted = gone.__class__(
        seq=agent.seq + 1, lane=gone.lane, kind="contact_points", op="delete", key=gone.key,
        data={"id": gone.key},
    )  # fmt: skip
    agent.seq += 1
    await _send(cloud, agent, [deleted])
    assert await system.fetchval("SELECT count(*) FROM contact_points") == 1
    await system.execute(
        "UPDATE agents SET last_seen_at = now() - interval '20 minutes' WHERE id = $1::uuid",
        agent.agent_id,
    )
    [silence] = await cloud.client.app[SILENCE_WATCH].run_once()
    assert silence.back_at is None
    assert await system.fetchval("SELECT count(*) FROM cloud_notifications") == 0
    assert ntfy.received == []


async def test_a_message_the_agent_handed_over_is_sent_once_by_the_cloud(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World, system: Conn, ntfy: NtfyReceiver
) -> None:
    one = await make_cloud(**QUIET)
    two = await make_cloud(**QUIET)
    agent = await _paired(one, world)
    contact = _contact(agent, ntfy.url("grower"), await _sealing_key(one))
    notification_id = str(uuid.uuid4())
    handed = {
        "id": notification_id,
        "farm_id": agent.farm_id,
        "contact_point_id": contact.key,
        "created_at": "2026-01-01T02:14:00.000Z",
        "title": "[CRITICAL] North: pump 3 flow 0 below 1",
        "body": "pump 3 flow 0 below 1\nWhere: Farm North",
    }
    await _send(one, agent, [contact, agent.record("notifications", notification_id, handed)])
    watches = [one.client.app[SILENCE_WATCH], two.client.app[SILENCE_WATCH]]
    for _ in range(2):
        await asyncio.gather(*(w.run_once() for w in watches))
    [message] = await ntfy.wait_for(lambda got: len(got) >= 1)
    assert message.title == handed["title"] and "Where: Farm North" in message.message
    # The agent sends the record again (an answer it did not see): still one message.
    await _send(two, agent, [agent.record("notifications", notification_id, handed)])
    for _ in range(2):
        await asyncio.gather(*(w.run_once() for w in watches))
    assert len(ntfy.received) == 1
    rows = await system.fetch("SELECT kind, status FROM cloud_notifications")
    assert [(r["kind"], r["status"]) for r in rows] == [("handover", "sent")]


async def test_a_handed_over_message_for_another_agents_contact_point_is_refused(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World, system: Conn, ntfy: NtfyReceiver
) -> None:
    cloud = await make_cloud(**QUIET)
    theirs = await _paired(cloud, world)
    contact = _contact(theirs, ntfy.url("theirs"), await _sealing_key(cloud))
    await _send(cloud, theirs, [contact])
    mine = await _paired(cloud, world)
    notification_id = str(uuid.uuid4())
    record = mine.record(
        "notifications",
        notification_id,
        {"id": notification_id, "farm_id": theirs.farm_id, "contact_point_id": contact.key,
         "title": "spoof", "body": "spoof"},
    )  # fmt: skip
    base = str(cloud.client.make_url("")).rstrip("/")
    async with aiohttp.ClientSession() as session:
        status, ack = await mine.post(session, base, mine.sign([record]))
    assert status == 200 and ack["rejected"] == 1
    assert await system.fetchval("SELECT count(*) FROM cloud_notifications") == 0


async def test_a_url_sealed_for_another_contact_point_or_key_is_refused(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World, system: Conn, ntfy: NtfyReceiver
) -> None:
    cloud = await make_cloud(**QUIET)
    agent = await _paired(cloud, world)
    moved = _contact(agent, ntfy.url("moved"), await _sealing_key(cloud), sealed_for="another")
    forged = _contact(agent, ntfy.url("forged"), X25519PrivateKey.generate().public_key())
    base = str(cloud.client.make_url("")).rstrip("/")
    async with aiohttp.ClientSession() as session:
        status, ack = await agent.post(session, base, agent.sign([moved, forged]))
    assert status == 200 and ack["rejected"] == 2
    letters = await system.fetch("SELECT kind, reason FROM sync_dead_letters ORDER BY seq")
    assert [r["kind"] for r in letters] == ["contact_points", "contact_points"]
    assert all("does not open" in r["reason"] for r in letters)
    assert await system.fetchval("SELECT count(*) FROM contact_points") == 0
