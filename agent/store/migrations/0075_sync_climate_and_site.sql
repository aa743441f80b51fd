-- The cloud's climate reads and plan progress (issue 12) need what only the agent knew:
--
-- - The climate history (settings changes, and the loop's actions with the readings that caused
--   them, its fail-safes and manual holds) goes up like events: every entry once, lane 0. The
--   cloud shows the loop's state (last action, speed, fail-safe, hold) from its newest entries.
-- - Site settings the cloud must apply the agent's way: the time zone plan days are counted in.
--   The agent writes its current value at start-up; the trigger sends only a change.

CREATE TRIGGER outbox_climate_history_insert AFTER INSERT ON climate_history
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'climate_history', 'climate_history', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'row_id', NEW.row_id, 'settings_id', NEW.settings_id, 'kind', NEW.kind, 'at', NEW.at, 'actor_id', NEW.actor_id, 'actor_email', NEW.actor_email, 'data', json(NEW.data)) AS p);
END;

CREATE TABLE site_settings (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TRIGGER outbox_site_settings_insert AFTER INSERT ON site_settings
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'site_settings', 'site_settings', NEW.key, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('key', NEW.key, 'value', NEW.value, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_site_settings_update AFTER UPDATE ON site_settings
WHEN NEW.value IS NOT OLD.value
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'site_settings', 'site_settings', NEW.key, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('key', NEW.key, 'value', NEW.value, 'updated_at', NEW.updated_at) AS p);
END;
