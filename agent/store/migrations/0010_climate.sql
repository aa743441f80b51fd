-- Climate control (docs/design.md, section 12; issue 4): one settings row per farm,
-- and per row that has its own, plus a history of every settings change and control action.

CREATE TABLE climate_settings (
    id                TEXT PRIMARY KEY,
    farm_id           TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    row_id            TEXT REFERENCES farm_rows(id) ON DELETE CASCADE,
    temperature_target REAL NOT NULL,
    temperature_band  REAL NOT NULL,
    humidity_target   REAL NOT NULL,
    humidity_band     REAL NOT NULL,
    co2_target        REAL,
    co2_band          REAL,
    vpd_target        REAL,
    vpd_band          REAL,
    mode              TEXT NOT NULL CHECK (mode IN ('auto', 'manual')),
    -- JSON arrays of device ids; sensor_device_ids NULL means "the farm's sensors".
    fan_ids           TEXT NOT NULL DEFAULT '[]',
    sensor_device_ids TEXT,
    run_speed         INTEGER NOT NULL CHECK (run_speed BETWEEN 1 AND 100),
    min_on_s          INTEGER NOT NULL CHECK (min_on_s >= 0),
    min_off_s         INTEGER NOT NULL CHECK (min_off_s >= 0),
    failsafe_speed    INTEGER NOT NULL CHECK (failsafe_speed BETWEEN 0 AND 100),
    stale_after_s     INTEGER NOT NULL CHECK (stale_after_s > 0),
    manual_hold_s     INTEGER NOT NULL CHECK (manual_hold_s > 0),
    updated_by        TEXT,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
);
-- One settings row for the farm (row_id NULL) and one per row: NULLs are distinct in UNIQUE.
CREATE UNIQUE INDEX climate_settings_scope ON climate_settings(farm_id, coalesce(row_id, ''));

-- kind: settings (data = the new settings), action (a fan command and the readings causing it),
-- failsafe (sensors stale, fans to the fail-safe speed), hold (a manual command paused the loop).
CREATE TABLE climate_history (
    id          TEXT PRIMARY KEY,
    farm_id     TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    row_id      TEXT,
    settings_id TEXT,
    kind        TEXT NOT NULL CHECK (kind IN ('settings', 'action', 'failsafe', 'hold')),
    at          TEXT NOT NULL,
    actor_id    TEXT,
    actor_email TEXT,
    data        TEXT NOT NULL
);
CREATE INDEX climate_history_farm ON climate_history(farm_id, at);

-- Sync (docs/design.md, section 8): settings are configuration, lane 0, like 0008's triggers.
CREATE TRIGGER outbox_climate_settings_insert AFTER INSERT ON climate_settings
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'climate_settings', 'climate_settings', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'row_id', NEW.row_id, 'temperature_target', NEW.temperature_target, 'temperature_band', NEW.temperature_band, 'humidity_target', NEW.humidity_target, 'humidity_band', NEW.humidity_band, 'co2_target', NEW.co2_target, 'co2_band', NEW.co2_band, 'vpd_target', NEW.vpd_target, 'vpd_band', NEW.vpd_band, 'mode', NEW.mode, 'fan_ids', json(NEW.fan_ids), 'sensor_device_ids', json(NEW.sensor_device_ids), 'run_speed', NEW.run_speed, 'min_on_s', NEW.min_on_s, 'min_off_s', NEW.min_off_s, 'failsafe_speed', NEW.failsafe_speed, 'stale_after_s', NEW.stale_after_s, 'manual_hold_s', NEW.manual_hold_s, 'updated_by', NEW.updated_by, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_climate_settings_update AFTER UPDATE ON climate_settings
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'climate_settings', 'climate_settings', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'row_id', NEW.row_id, 'temperature_target', NEW.temperature_target, 'temperature_band', NEW.temperature_band, 'humidity_target', NEW.humidity_target, 'humidity_band', NEW.humidity_band, 'co2_target', NEW.co2_target, 'co2_band', NEW.co2_band, 'vpd_target', NEW.vpd_target, 'vpd_band', NEW.vpd_band, 'mode', NEW.mode, 'fan_ids', json(NEW.fan_ids), 'sensor_device_ids', json(NEW.sensor_device_ids), 'run_speed', NEW.run_speed, 'min_on_s', NEW.min_on_s, 'min_off_s', NEW.min_off_s, 'failsafe_speed', NEW.failsafe_speed, 'stale_after_s', NEW.stale_after_s, 'manual_hold_s', NEW.manual_hold_s, 'updated_by', NEW.updated_by, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_climate_settings_delete AFTER DELETE ON climate_settings
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'climate_settings', 'climate_settings', OLD.id, 'delete', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', OLD.id, 'farm_id', OLD.farm_id) AS p);
END;
