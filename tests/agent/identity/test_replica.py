"""The identity replica of a paired agent (issue 16): it flows one way, from the cloud down.

Applying a delta never writes the outbox; a delta older than the one held is ignored; cloud
sessions and API keys work here until the cloud revokes them; and a paired agent refuses, with
409 MANAGED_BY_CLOUD, identity changes that belong to the cloud.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from agent.store.db import Database
from agent.store.identity_replica import IdentityReplicaStore
from agent.sync.link import CloudLink
from agent.web.keys import DATABASE
from farmkit.passwords import hash_password
from protocol.sync import (
    IdentityDelta,
    ReplicaApiKey,
    ReplicaPermission,
    ReplicaSession,
    ReplicaUser,
)
from protocol.timefmt import now_iso
from protocol.tokens import hash_secret
from tests.agent.identity.conftest import (
    PASSWORD,
    CapturedMail,
    create_user,
    error_of,
    login,
    tokens_of,
)
from tests.conftest import Agent

GROWER = str(uuid.uuid4())
GROWER_EMAIL = "grower@cloud.test"
CLOUD_KEY = "fk_cloud_key_of_the_grower_0123456789"
SESSION = str(uuid.uuid4())
GRANT = str(uuid.uuid4())
KEY_ID = str(uuid.uuid4())


def _delta(
    version: int,
    farm_id: str,
    *,
    permission: str | None = "read_write",
    session_revoked: bool = False,
    key_listed: bool = True,
    key_revoked: bool = False,
    listed_session: bool = True,
) -> IdentityDelta:
    """The cloud's view: one grower with a grant, a session and an API key."""
    now = now_iso()
    if permission is None and not listed_session and not key_listed:
        # No grant left: the cloud no longer counts the grower among the agent's users.
        return IdentityDelta(issuer="farm-cloud", public_key="A" * 43, version=version)
    return IdentityDelta(
        issuer="farm-cloud",
        public_key="A" * 43,
        version=version,
        users=(
            ReplicaUser(
                id=GROWER,
                email=GROWER_EMAIL,
                role="operator",
                plan="standard",
                status="active",
                password_hash=_HASH,
            ),
        ),
        permissions=()
        if permission is None
        else (
            ReplicaPermission(
                id=GRANT, user_id=GROWER, farm_id=farm_id, permission_type=permission
            ),
        ),
        sessions=(
            ReplicaSession(
                id=SESSION,
                user_id=GROWER,
                created_at=now,
                expires_at="2999-01-01T00:00:00.000Z",
                revoked_at=now if session_revoked else None,
            ),
        )
        if listed_session
        else (),
        api_keys=(
            ReplicaApiKey(
                id=KEY_ID,
                user_id=GROWER,
                name="greenhouse display",
                prefix=CLOUD_KEY[:12],
                key_hash=hash_secret(CLOUD_KEY),
                created_at=now,
                expires_at=None,
                revoked_at=now if key_revoked else None,
            ),
        )
        if key_listed
        else (),
    )


_HASH = hash_password(PASSWORD)


async def _farm(agent: Agent) -> str:
    resp = await agent.client.post("/api/v1/farms/", json={"name": "North"}, headers=agent.auth())
    assert resp.status == 201, await resp.text()
    farm_id: str = (await resp.json())["id"]
    return farm_id


async def _outbox(db: Database) -> tuple[Any, ...]:
    rows = await db.fetch_all("SELECT seq, entity, entity_id, op FROM outbox ORDER BY seq")
    stats = await db.fetch_one("SELECT records, bytes FROM outbox_stats")
    assert stats is not None
    return (tuple(tuple(r) for r in rows), tuple(stats))


def _operation(document: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    """The OpenAPI operation whose path template matches the concrete ``path``."""
    for template, operations in document["paths"].items():
        pattern = re.sub(r"\\{[^/]+\\}", "[^/]+", re.escape(template.rstrip("/")))
        if re.fullmatch(pattern, path.rstrip("/")):
            operation: dict[str, Any] = operations[method.lower()]
            return operation
    raise AssertionError(f"{path} is not documented")


async def _grant_of(db: Database) -> str | None:
    value = await db.fetch_value(
        "SELECT permission_type FROM permissions WHERE user_id = ?", (GROWER,)
    )
    return None if value is None else str(value)


async def test_applying_a_delta_leaves_the_outbox_unchanged(agent: Agent) -> None:
    db = agent.client.app[DATABASE]
    farm_id = await _farm(agent)
    store = IdentityReplicaStore(db)
    before = await _outbox(db)
    # A grant, its downgrade, its removal, and a suspension: every kind of replica write.
    assert await store.apply(_delta(2, farm_id))
    assert await _grant_of(db) == "read_write"
    assert await store.apply(_delta(3, farm_id, permission="read_only", session_revoked=True))
    assert await _grant_of(db) == "read_only"
    assert await store.apply(_delta(4, farm_id, permission=None, key_revoked=True))
    assert await _grant_of(db) is None
    assert await _outbox(db) == before


async def test_a_grant_made_on_the_agent_never_enters_the_outbox(agent: Agent) -> None:
    db = agent.client.app[DATABASE]
    farm_id = await _farm(agent)
    user = await create_user(agent, "operator")
    before = await _outbox(db)
    resp = await agent.client.post(
        "/api/v1/permissions",
        json={"user_id": user["id"], "farm_id": farm_id, "permission_type": "read_write"},
        headers=agent.auth(),
    )
    assert resp.status == 201, await resp.text()
    assert await _outbox(db) == before


async def test_a_delta_older_than_the_one_held_is_ignored(agent: Agent) -> None:
    db = agent.client.app[DATABASE]
    farm_id = await _farm(agent)
    store = IdentityReplicaStore(db)
    assert await store.apply(_delta(7, farm_id, permission="read_only"))
    # A slow answer from before the downgrade arrives late: it must not give the grant back.
    assert not await store.apply(_delta(6, farm_id, permission="read_write"))
    assert not await store.apply(_delta(7, farm_id, permission="read_write"))
    assert await _grant_of(db) == "read_only"
    assert await store.version() == 7
    assert await store.apply(_delta(8, farm_id, permission=None))
    assert await _grant_of(db) is None


async def test_a_cloud_api_key_works_until_the_cloud_revokes_it(agent: Agent) -> None:
    db = agent.client.app[DATABASE]
    farm_id = await _farm(agent)
    store = IdentityReplicaStore(db)
    key = {"X-API-Key": CLOUD_KEY}
    await store.apply(_delta(2, farm_id))
    assert (await agent.client.get(f"/api/v1/farms/{farm_id}", headers=key)).status == 200
    await store.apply(_delta(3, farm_id, key_revoked=True))
    assert (await agent.client.get(f"/api/v1/farms/{farm_id}", headers=key)).status == 401
    # Deleted in the cloud (no longer listed) is refused too, and a later listing without the
    # revocation does not bring it back.
    await store.apply(_delta(4, farm_id))
    assert (await agent.client.get(f"/api/v1/farms/{farm_id}", headers=key)).status == 401


async def test_a_cloud_session_the_cloud_stops_listing_is_revoked_here(agent: Agent) -> None:
    db = agent.client.app[DATABASE]
    farm_id = await _farm(agent)
    store = IdentityReplicaStore(db)
    await store.apply(_delta(2, farm_id))
    # The grower also logs in on the LAN: that session is the agent's own.
    lan = await tokens_of(agent, GROWER_EMAIL)
    # Revoked in the cloud longer ago than its window: the cloud no longer lists it.
    await store.apply(_delta(3, farm_id, listed_session=False))
    revoked = await db.fetch_value("SELECT revoked_at FROM sessions WHERE id = ?", (SESSION,))
    assert revoked is not None
    resp = await agent.client.get(
        f"/api/v1/farms/{farm_id}", headers=agent.auth(lan["access_token"])
    )
    assert resp.status == 200


async def _pair(agent_state: Any) -> None:
    CloudLink("http://cloud.invalid", str(uuid.uuid4()), "farm-cloud", "A" * 43).save(agent_state)


async def test_a_paired_agent_leaves_identity_changes_to_the_cloud(
    make_agent: Any, tmp_path: Any, mail: CapturedMail
) -> None:
    agent: Agent = await make_agent(sync_enabled=False)
    db = agent.client.app[DATABASE]
    farm_id = await _farm(agent)
    local = await create_user(agent, "operator")
    await IdentityReplicaStore(db).apply(_delta(2, farm_id))
    await _pair(tmp_path / "state")
    admin = agent.auth()

    refused = [
        (
            "POST",
            "/api/v1/users/",
            {"email": "new@farm.test", "password": PASSWORD, "role": "user"},
        ),
        ("PUT", f"/api/v1/users/{GROWER}", {"role": "admin"}),
        ("DELETE", f"/api/v1/users/{GROWER}", None),
        ("PUT", f"/api/v1/users/{local['id']}", {"farms_access": [farm_id]}),
        (
            "POST",
            "/api/v1/permissions",
            {"user_id": local["id"], "farm_id": farm_id, "permission_type": "read_write"},
        ),
        ("DELETE", f"/api/v1/permissions/{GRANT}", None),
        ("POST", "/api/v1/api-keys", {"user_id": GROWER, "name": "wall display"}),
        ("DELETE", f"/api/v1/api-keys/{KEY_ID}", None),
    ]
    for method, path, body in refused:
        resp = await agent.client.request(method, path, json=body, headers=admin)
        error = await error_of(resp, 409)
        assert error["code"] == "MANAGED_BY_CLOUD", (method, path)
        assert "cloud" in error["message"]
    # Nothing changed: the grant and the key are as the cloud said.
    assert await _grant_of(db) == "read_write"
    assert (
        await agent.client.get(f"/api/v1/farms/{farm_id}", headers={"X-API-Key": CLOUD_KEY})
    ).status == 200

    resp = await agent.client.post(
        "/auth/register", json={"email": "walk-in@farm.test", "password": PASSWORD}
    )
    assert (await error_of(resp, 409))["code"] == "MANAGED_BY_CLOUD"
    # Every one of these answers is in the API's documented responses (issue 24).
    document = await (await agent.client.get("/api/v1/openapi.json")).json()
    for method, path, _ in [*refused, ("POST", "/auth/register", None)]:
        responses = _operation(document, method, path)["responses"]
        assert "409" in responses, (method, path)
        assert "MANAGED_BY_CLOUD" in responses["409"]["description"], (method, path)
    # A cloud user resets their password in the cloud: the answer is the same, no mail is sent.
    resp = await agent.client.post("/auth/reset-password", json={"email": GROWER_EMAIL})
    assert resp.status == 202, await resp.text()
    assert [m for m in mail.messages if m.to == GROWER_EMAIL] == []

    # A cloud user cannot change their own profile or MFA here either.
    grower = await tokens_of(agent, GROWER_EMAIL)
    mine = agent.auth(grower["access_token"])
    resp = await agent.client.put("/api/v1/users/profile", json={"full_name": "G"}, headers=mine)
    assert (await error_of(resp, 409))["code"] == "MANAGED_BY_CLOUD"
    resp = await agent.client.post("/auth/mfa/enrol", headers=mine)
    assert (await error_of(resp, 409))["code"] == "MANAGED_BY_CLOUD"

    # The agent's own local accounts stay local: the break-glass admin still manages them.
    resp = await agent.client.put(
        f"/api/v1/users/{local['id']}", json={"full_name": "Night shift"}, headers=admin
    )
    assert resp.status == 200, await resp.text()
    resp = await agent.client.post(
        "/api/v1/api-keys", json={"user_id": local["id"], "name": "local script"}, headers=admin
    )
    assert resp.status == 201, await resp.text()
    assert (await login(agent, local["email"])).status == 200


async def test_a_grower_who_loses_and_regains_a_grant_keeps_their_cloud_session(
    agent: Agent,
) -> None:
    db = agent.client.app[DATABASE]
    farm_id = await _farm(agent)
    store = IdentityReplicaStore(db)
    await store.apply(_delta(2, farm_id))
    await store.apply(_delta(3, farm_id, permission=None, listed_session=False, key_listed=False))
    status = await db.fetch_value("SELECT status FROM users WHERE id = ?", (GROWER,))
    assert status == "inactive"
    key = {"X-API-Key": CLOUD_KEY}
    assert (await agent.client.get(f"/api/v1/farms/{farm_id}", headers=key)).status == 401
    await store.apply(_delta(4, farm_id))
    revoked = await db.fetch_value("SELECT revoked_at FROM sessions WHERE id = ?", (SESSION,))
    assert revoked is None
    assert (await agent.client.get(f"/api/v1/farms/{farm_id}", headers=key)).status == 200
