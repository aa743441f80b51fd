-- Devices' last_reading and last_seen in a narrow table of their own (docs/adr/0080).
--
-- The reading store stamps every device that received a reading about once a minute and at
-- each fold. In `devices` each stamp rewrote its device's row, and a row is wide (address,
-- JSON settings and calibration, state): 500 devices' stamps dirtied about 200 pages a minute,
-- each written to the WAL and again at the checkpoint, on an SD card that wears by the bytes
-- written. In `device_stamps` a row is about 20 bytes (an integer key, two integers of unix
-- milliseconds), so the same stamps dirty about a dozen pages.
--
-- The key is `devices.num`, a small integer of the device's own, not its 36-character id (which
-- would cost more than the stamps) nor the implicit rowid of `devices` (VACUUM may renumber the
-- rowids of a table without an INTEGER PRIMARY KEY, and the stamps would follow other
-- devices). A device inserted without one takes the next number; a deleted device's stamps
-- go with it (the foreign key's cascade).
--
-- Stamps are read as they were, ISO 8601 text with milliseconds, and a device's sync record
-- carries them as before: its triggers are recreated to take them from `device_stamps`, and
-- the old columns are dropped (an unused column left behind would read as a stale stamp).

ALTER TABLE devices ADD COLUMN num INTEGER;
UPDATE devices SET num = rowid;
CREATE UNIQUE INDEX devices_num ON devices(num);

CREATE TRIGGER devices_number AFTER INSERT ON devices WHEN NEW.num IS NULL
BEGIN
    UPDATE devices SET num = (SELECT coalesce(max(num), 0) + 1 FROM devices)
    WHERE rowid = NEW.rowid;
END;

CREATE TABLE device_stamps (
    device       INTEGER PRIMARY KEY REFERENCES devices(num) ON DELETE CASCADE,
    -- unix ms: the newest reading stored, and when the device was last heard (a reading, or
    -- coming online); each only ever moves forward.
    last_reading INTEGER,
    last_seen    INTEGER
);

INSERT INTO device_stamps (device, last_reading, last_seen)
SELECT num,
       CAST(round((julianday(last_reading) - 2440587.5) * 86400000.0) AS INTEGER),
       CAST(round((julianday(last_seen) - 2440587.5) * 86400000.0) AS INTEGER)
FROM devices
WHERE last_reading IS NOT NULL OR last_seen IS NOT NULL;

DROP TRIGGER outbox_devices_insert;
DROP TRIGGER outbox_devices_update;

ALTER TABLE devices DROP COLUMN last_reading;
ALTER TABLE devices DROP COLUMN last_seen;

-- The payload of 0008, key for key; a new device has no stamps yet.
CREATE TRIGGER outbox_devices_insert AFTER INSERT ON devices
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'device', 'devices', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'name', NEW.name, 'kind', NEW.kind, 'device_type', NEW.device_type, 'location', NEW.location, 'status', NEW.status, 'profile', NEW.profile, 'transport', NEW.transport, 'topic_base', NEW.topic_base, 'topic_variables', NEW.topic_variables, 'serial_port', NEW.serial_port, 'serial_settings', NEW.serial_settings, 'mac_address', NEW.mac_address, 'firmware_version', NEW.firmware_version, 'battery_level', NEW.battery_level, 'calibration_data', NEW.calibration_data, 'last_reading', NULL, 'last_seen', NULL, 'admin_status', NEW.admin_status, 'availability', NEW.availability, 'state', NEW.state, 'state_updated_at', NEW.state_updated_at, 'max_speed', NEW.max_speed, 'rated_power_w', NEW.rated_power_w, 'runtime_s', NEW.runtime_s, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p);
END;

-- Not on a stamp alone, as before: the reading store stamps devices every minute.
CREATE TRIGGER outbox_devices_update AFTER UPDATE OF farm_id, name, kind, device_type, location, status, profile, transport, topic_base, topic_variables, serial_port, serial_settings, mac_address, firmware_version, battery_level, calibration_data, admin_status, availability, state, state_updated_at, max_speed, rated_power_w, created_at, updated_at ON devices
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'device', 'devices', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'name', NEW.name, 'kind', NEW.kind, 'device_type', NEW.device_type, 'location', NEW.location, 'status', NEW.status, 'profile', NEW.profile, 'transport', NEW.transport, 'topic_base', NEW.topic_base, 'topic_variables', NEW.topic_variables, 'serial_port', NEW.serial_port, 'serial_settings', NEW.serial_settings, 'mac_address', NEW.mac_address, 'firmware_version', NEW.firmware_version, 'battery_level', NEW.battery_level, 'calibration_data', NEW.calibration_data, 'last_reading', strftime('%Y-%m-%dT%H:%M:%fZ', s.last_reading / 1000.0, 'unixepoch'), 'last_seen', strftime('%Y-%m-%dT%H:%M:%fZ', s.last_seen / 1000.0, 'unixepoch'), 'admin_status', NEW.admin_status, 'availability', NEW.availability, 'state', NEW.state, 'state_updated_at', NEW.state_updated_at, 'max_speed', NEW.max_speed, 'rated_power_w', NEW.rated_power_w, 'runtime_s', NEW.runtime_s, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at) AS p
          FROM (SELECT 1) LEFT JOIN device_stamps AS s ON s.device = NEW.num);
END;
