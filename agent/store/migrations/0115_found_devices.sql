-- Devices the agent heard announce themselves (Tasmota, ESPHome, zigbee2mqtt, Shelly, and any
-- other source through one function) and not yet registered: shown under "Found" with the
-- proposed firmware profile and address and the readings heard so far, until a person adds
-- (registers) or ignores one. Keyed by (source, key): the same device announcing again updates
-- its row. address_key is the topic base or port a registered device would have: a candidate
-- with a registered device there is not listed. Not synced: discovery is the farm LAN's own.
CREATE TABLE found_devices (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    profile TEXT,
    kind TEXT NOT NULL,
    address TEXT NOT NULL,
    address_key TEXT NOT NULL,
    readings TEXT NOT NULL DEFAULT '{}',
    ignored_at TEXT,
    ignored_by TEXT,
    device_id TEXT,
    first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL,
    UNIQUE (source, key)
);
CREATE INDEX found_devices_address ON found_devices (address_key);
