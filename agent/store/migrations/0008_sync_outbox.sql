-- The sync outbox (docs/design.md, section 8): every change to synced data is appended here by the
-- triggers below, in the same transaction as the change, with a monotonic sequence number
-- (AUTOINCREMENT never reuses a number, even after the newest rows are trimmed).
-- lane 0 = priority (configuration, calibrations, events), lane 1 = bulk readings (protocol/sync.py
-- Lane). payload is compact JSON; bytes its length, summed in outbox_stats for the cap.

CREATE TABLE outbox (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    lane       INTEGER NOT NULL CHECK (lane IN (0, 1)),
    kind       TEXT NOT NULL,
    entity     TEXT NOT NULL,
    entity_id  TEXT NOT NULL,
    op         TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
    payload    TEXT NOT NULL,
    bytes      INTEGER NOT NULL,
    -- unix ms; the age of the oldest unsent record is an operator figure.
    created_at INTEGER NOT NULL,
    -- 1 once a batch holding it was acknowledged but the cloud's contiguous ack is still below
    -- it (a priority record overtaking a bulk backlog): never sent again, trimmed later.
    sent       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX outbox_pending ON outbox(lane, sent, seq);

-- One row: running totals, so the cap check and the health figures never scan the outbox.
CREATE TABLE outbox_stats (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    records   INTEGER NOT NULL DEFAULT 0,
    bytes     INTEGER NOT NULL DEFAULT 0,
    rolled_up INTEGER NOT NULL DEFAULT 0,
    rejected  INTEGER NOT NULL DEFAULT 0,
    acked_seq INTEGER NOT NULL DEFAULT 0,
    last_success_ms INTEGER
);
INSERT INTO outbox_stats (id) VALUES (1);

CREATE TRIGGER outbox_count_insert AFTER INSERT ON outbox
BEGIN
    UPDATE outbox_stats SET records = records + 1, bytes = bytes + NEW.bytes WHERE id = 1;
END;
-- Deletes are counted by agent/sync/outbox.py once per statement: a row trigger would cost an
-- UPDATE per trimmed row, and trims are tens of thousands of rows.

-- Raw readings: the series is resolved to (device, metric, unit) when the uploader builds blocks;
-- series rows never change. Deleting readings (retention) is not synced: the cloud keeps its own.
CREATE TRIGGER outbox_readings AFTER INSERT ON readings
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 1, 'reading', 'readings', NEW.series_id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('s', NEW.series_id, 't', NEW.ts, 'v', NEW.value) AS p);
END;

CREATE TRIGGER outbox_farms_insert AFTER INSERT ON farms
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'farm', 'farms', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'name', NEW.name, 'description', NEW.description, 'location', NEW.location, 'status', NEW.status, 'created_by', NEW.created_by, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_farms_update AFTER UPDATE ON farms
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'farm', 'farms', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'name', NEW.name, 'description', NEW.description, 'location', NEW.location, 'status', NEW.status, 'created_by', NEW.created_by, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_farms_delete AFTER DELETE ON farms
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'farm', 'farms', OLD.id, 'delete', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', OLD.id) AS p);
END;

CREATE TRIGGER outbox_farm_rows_insert AFTER INSERT ON farm_rows
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'row', 'farm_rows', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'name', NEW.name, 'position', NEW.position, 'status', NEW.status, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_farm_rows_update AFTER UPDATE ON farm_rows
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'row', 'farm_rows', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'name', NEW.name, 'position', NEW.position, 'status', NEW.status, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_farm_rows_delete AFTER DELETE ON farm_rows
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'row', 'farm_rows', OLD.id, 'delete', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', OLD.id, 'farm_id', OLD.farm_id) AS p);
END;

CREATE TRIGGER outbox_racks_insert AFTER INSERT ON racks
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'rack', 'racks', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'row_id', NEW.row_id, 'farm_id', NEW.farm_id, 'name', NEW.name, 'position', NEW.position, 'height_cm', NEW.height_cm, 'width_cm', NEW.width_cm, 'depth_cm', NEW.depth_cm, 'status', NEW.status, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_racks_update AFTER UPDATE ON racks
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'rack', 'racks', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'row_id', NEW.row_id, 'farm_id', NEW.farm_id, 'name', NEW.name, 'position', NEW.position, 'height_cm', NEW.height_cm, 'width_cm', NEW.width_cm, 'depth_cm', NEW.depth_cm, 'status', NEW.status, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_racks_delete AFTER DELETE ON racks
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'rack', 'racks', OLD.id, 'delete', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', OLD.id, 'farm_id', OLD.farm_id) AS p);
END;

CREATE TRIGGER outbox_shelves_insert AFTER INSERT ON shelves
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'shelf', 'shelves', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'rack_id', NEW.rack_id, 'row_id', NEW.row_id, 'farm_id', NEW.farm_id, 'name', NEW.name, 'level', NEW.level, 'plant_capacity', NEW.plant_capacity, 'current_species', NEW.current_species, 'current_plant_count', NEW.current_plant_count, 'status', NEW.status, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_shelves_update AFTER UPDATE ON shelves
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'shelf', 'shelves', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'rack_id', NEW.rack_id, 'row_id', NEW.row_id, 'farm_id', NEW.farm_id, 'name', NEW.name, 'level', NEW.level, 'plant_capacity', NEW.plant_capacity, 'current_species', NEW.current_species, 'current_plant_count', NEW.current_plant_count, 'status', NEW.status, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_shelves_delete AFTER DELETE ON shelves
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'shelf', 'shelves', OLD.id, 'delete', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', OLD.id, 'farm_id', OLD.farm_id) AS p);
END;

CREATE TRIGGER outbox_devices_insert AFTER INSERT ON devices
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'device', 'devices', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'name', NEW.name, 'kind', NEW.kind, 'device_type', NEW.device_type, 'location', NEW.location, 'status', NEW.status, 'profile', NEW.profile, 'transport', NEW.transport, 'topic_base', NEW.topic_base, 'topic_variables', NEW.topic_variables, 'serial_port', NEW.serial_port, 'serial_settings', NEW.serial_settings, 'mac_address', NEW.mac_address, 'firmware_version', NEW.firmware_version, 'battery_level', NEW.battery_level, 'calibration_data', NEW.calibration_data, 'last_reading', NEW.last_reading, 'last_seen', NEW.last_seen, 'admin_status', NEW.admin_status, 'availability', NEW.availability, 'state', NEW.state, 'state_updated_at', NEW.state_updated_at, 'max_speed', NEW.max_speed, 'rated_power_w', NEW.rated_power_w, 'runtime_s', NEW.runtime_s, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

-- Not on last_reading/last_seen/runtime_s alone: the reading writer stamps them every batch.
CREATE TRIGGER outbox_devices_update AFTER UPDATE OF farm_id, name, kind, device_type, location, status, profile, transport, topic_base, topic_variables, serial_port, serial_settings, mac_address, firmware_version, battery_level, calibration_data, admin_status, availability, state, state_updated_at, max_speed, rated_power_w, created_at, updated_at ON devices
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'device', 'devices', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'name', NEW.name, 'kind', NEW.kind, 'device_type', NEW.device_type, 'location', NEW.location, 'status', NEW.status, 'profile', NEW.profile, 'transport', NEW.transport, 'topic_base', NEW.topic_base, 'topic_variables', NEW.topic_variables, 'serial_port', NEW.serial_port, 'serial_settings', NEW.serial_settings, 'mac_address', NEW.mac_address, 'firmware_version', NEW.firmware_version, 'battery_level', NEW.battery_level, 'calibration_data', NEW.calibration_data, 'last_reading', NEW.last_reading, 'last_seen', NEW.last_seen, 'admin_status', NEW.admin_status, 'availability', NEW.availability, 'state', NEW.state, 'state_updated_at', NEW.state_updated_at, 'max_speed', NEW.max_speed, 'rated_power_w', NEW.rated_power_w, 'runtime_s', NEW.runtime_s, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

CREATE TRIGGER outbox_devices_delete AFTER DELETE ON devices
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'device', 'devices', OLD.id, 'delete', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', OLD.id, 'farm_id', OLD.farm_id) AS p);
END;

CREATE TRIGGER outbox_calibrations_insert AFTER INSERT ON calibrations
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'calibration', 'calibrations', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'device_id', NEW.device_id, 'metric', NEW.metric, 'performed_by', NEW.performed_by, 'performed_by_email', NEW.performed_by_email, 'performed_at', NEW.performed_at, 'method', NEW.method, 'points', NEW.points, 'slope', NEW.slope, 'offset', NEW.offset, 'device_response', NEW.device_response, 'outcome', NEW.outcome, 'failed_step', NEW.failed_step, 'failed_step_name', NEW.failed_step_name, 'message', NEW.message, 'active', NEW.active) AS p);
END;

CREATE TRIGGER outbox_calibrations_update AFTER UPDATE ON calibrations
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'calibration', 'calibrations', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'device_id', NEW.device_id, 'metric', NEW.metric, 'performed_by', NEW.performed_by, 'performed_by_email', NEW.performed_by_email, 'performed_at', NEW.performed_at, 'method', NEW.method, 'points', NEW.points, 'slope', NEW.slope, 'offset', NEW.offset, 'device_response', NEW.device_response, 'outcome', NEW.outcome, 'failed_step', NEW.failed_step, 'failed_step_name', NEW.failed_step_name, 'message', NEW.message, 'active', NEW.active) AS p);
END;

CREATE TRIGGER outbox_calibrations_delete AFTER DELETE ON calibrations
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'calibration', 'calibrations', OLD.id, 'delete', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', OLD.id, 'device_id', OLD.device_id) AS p);
END;

CREATE TRIGGER outbox_permissions_insert AFTER INSERT ON permissions
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'permission', 'permissions', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'user_id', NEW.user_id, 'farm_id', NEW.farm_id, 'permission_type', NEW.permission_type, 'resource_type', NEW.resource_type, 'granted_at', NEW.granted_at, 'granted_by', NEW.granted_by) AS p);
END;

CREATE TRIGGER outbox_permissions_update AFTER UPDATE ON permissions
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'permission', 'permissions', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'user_id', NEW.user_id, 'farm_id', NEW.farm_id, 'permission_type', NEW.permission_type, 'resource_type', NEW.resource_type, 'granted_at', NEW.granted_at, 'granted_by', NEW.granted_by) AS p);
END;

CREATE TRIGGER outbox_permissions_delete AFTER DELETE ON permissions
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'permission', 'permissions', OLD.id, 'delete', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', OLD.id, 'user_id', OLD.user_id, 'farm_id', OLD.farm_id) AS p);
END;
