-- The device registry (docs/design.md, section 5): firmware profile, transport address, the API's
-- "Sensor device" and "Fan" fields, actuator state, and the calibration history.

-- Firmware profile id (firmware_profiles/<id>.toml); NULL for a device registered without one,
-- which the runtime does not bind.
ALTER TABLE devices ADD COLUMN profile TEXT;
ALTER TABLE devices ADD COLUMN transport TEXT CHECK (transport IN ('mqtt', 'serial'));
-- MQTT address: the topic base ({base}) and overrides of the profile's [variables] (JSON object).
ALTER TABLE devices ADD COLUMN topic_base TEXT;
ALTER TABLE devices ADD COLUMN topic_variables TEXT NOT NULL DEFAULT '{}';
-- Serial address: the port path or pyserial URL and line settings overriding the profile's
-- [serial] table (JSON object: baudrate, bytesize, parity, stopbits).
ALTER TABLE devices ADD COLUMN serial_port TEXT;
ALTER TABLE devices ADD COLUMN serial_settings TEXT NOT NULL DEFAULT '{}';

ALTER TABLE devices ADD COLUMN mac_address TEXT;
ALTER TABLE devices ADD COLUMN firmware_version TEXT;
ALTER TABLE devices ADD COLUMN battery_level INTEGER CHECK (battery_level BETWEEN 0 AND 100);
-- Calibration metadata given at registration (docs/design.md, section 12: ph_offset,
-- temperature_compensation).
ALTER TABLE devices ADD COLUMN calibration_data TEXT NOT NULL DEFAULT '{}';
ALTER TABLE devices ADD COLUMN last_reading TEXT;
ALTER TABLE devices ADD COLUMN last_seen TEXT;
-- devices.status is what every view shows: the operator's admin_status (PUT /devices/{id}/status)
-- when it is not 'active', else the observed availability. The store keeps it so.
ALTER TABLE devices ADD COLUMN admin_status TEXT NOT NULL DEFAULT 'active'
    CHECK (admin_status IN ('active', 'maintenance', 'disabled'));
ALTER TABLE devices ADD COLUMN availability TEXT NOT NULL DEFAULT 'offline'
    CHECK (availability IN ('online', 'offline'));

-- Actuator state as reported by the device (JSON: power, fan_speed, brightness, valve).
ALTER TABLE devices ADD COLUMN state TEXT NOT NULL DEFAULT '{}';
ALTER TABLE devices ADD COLUMN state_updated_at TEXT;
ALTER TABLE devices ADD COLUMN max_speed INTEGER CHECK (max_speed BETWEEN 1 AND 100);
ALTER TABLE devices ADD COLUMN rated_power_w REAL CHECK (rated_power_w >= 0);
-- Accumulated running time; running_since is set while the device reports itself running.
ALTER TABLE devices ADD COLUMN runtime_s REAL NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN running_since TEXT;

CREATE UNIQUE INDEX devices_mac ON devices(mac_address) WHERE mac_address IS NOT NULL;
-- One EZO circuit per UART; one binding of a profile per topic base (a Tasmota node with a
-- sensor and a relay is two devices on one base with two profiles).
CREATE UNIQUE INDEX devices_serial_port ON devices(serial_port) WHERE serial_port IS NOT NULL;
CREATE UNIQUE INDEX devices_topic ON devices(profile, topic_base) WHERE topic_base IS NOT NULL;

-- Every calibration attempt, kept; at most one active calibration per device and metric.
CREATE TABLE calibrations (
    id                 TEXT PRIMARY KEY,
    device_id          TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    metric             TEXT NOT NULL,
    performed_by       TEXT REFERENCES users(id) ON DELETE SET NULL,
    performed_by_email TEXT NOT NULL,
    performed_at       TEXT NOT NULL,
    method             TEXT NOT NULL CHECK (method IN ('on_device', 'agent_linear', 'agent_offset')),
    points             TEXT NOT NULL,
    slope              REAL,
    offset             REAL,
    device_response    TEXT NOT NULL DEFAULT '{}',
    outcome            TEXT NOT NULL CHECK (outcome IN ('succeeded', 'failed')),
    failed_step        INTEGER,
    failed_step_name   TEXT,
    message            TEXT NOT NULL DEFAULT '',
    active             INTEGER NOT NULL DEFAULT 0
        CHECK (active IN (0, 1) AND (active = 0 OR outcome = 'succeeded'))
);
CREATE INDEX calibrations_device ON calibrations(device_id, performed_at);
CREATE UNIQUE INDEX calibrations_active ON calibrations(device_id, metric) WHERE active = 1;
