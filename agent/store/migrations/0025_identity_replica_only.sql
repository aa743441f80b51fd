-- Identity flows one way once paired (issue 16; docs/architecture.md "Identity";
-- protocol/sync_kinds.py): users, roles, permissions, sessions, API keys and MFA come down from
-- the cloud in the identity delta, and the agent never sends them back. The permissions
-- triggers of 0008 recorded the replica's own writes as local changes, the uploader sent them,
-- and a grant deleted in the cloud came back. Local accounts (the break-glass admin) stay local.

DROP TRIGGER outbox_permissions_insert;
DROP TRIGGER outbox_permissions_update;
DROP TRIGGER outbox_permissions_delete;

-- Grants already queued are never sent: the cloud would refuse them anyway. Their sequence
-- numbers become holes, which the batches' ranges account for.
UPDATE outbox_stats SET
    records = records - (SELECT count(*) FROM outbox WHERE entity = 'permissions'),
    bytes = bytes - (SELECT coalesce(sum(bytes), 0) FROM outbox WHERE entity = 'permissions')
WHERE id = 1;
DELETE FROM outbox WHERE entity = 'permissions';

-- The cloud's identity version of the delta the replica holds; a delta not newer is ignored,
-- so a slow answer never rolls a revocation back.
CREATE TABLE identity_replica_state (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL DEFAULT 0
);
INSERT INTO identity_replica_state (id) VALUES (1);

-- The cloud's API keys of replicated users work on the agent too (offline as well); an expired
-- key is refused like a revoked one.
ALTER TABLE api_keys ADD COLUMN expires_at TEXT;

-- Which sessions and keys are the cloud's (replicated) rather than opened or made here: the
-- replica revokes those the cloud no longer lists (revoked longer ago than its window, or
-- deleted), so a revocation never falls out of sight. Sessions opened before this migration
-- without a refresh token here came from the cloud.
ALTER TABLE sessions ADD COLUMN origin TEXT NOT NULL DEFAULT 'local';
UPDATE sessions SET origin = 'cloud'
WHERE id NOT IN (SELECT session_id FROM refresh_tokens);
ALTER TABLE api_keys ADD COLUMN origin TEXT NOT NULL DEFAULT 'local';
