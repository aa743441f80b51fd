-- The mirror carries every field of the agent's device registry (protocol/schemas/devices.py,
-- `Device`), so the cloud's GET /api/v1/devices answers in the agent's shape. Columns of the same
-- meaning keep their 0003 names (firmware_profile is the agent's `profile`).

ALTER TABLE devices
    -- What an operator set with PUT /devices/{id}/status; 'active' shows the observed status.
    ADD COLUMN admin_status text NOT NULL DEFAULT 'active'
        CHECK (admin_status IN ('active', 'maintenance', 'disabled')),
    -- Actuator state as the device reported it (power, fan_speed, brightness, valve).
    ADD COLUMN state jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN state_updated_at timestamptz,
    ADD COLUMN rated_power_w double precision CHECK (rated_power_w >= 0),
    ADD COLUMN last_seen timestamptz;

-- GET /api/v1/devices filters by kind within the caller's farms.
CREATE INDEX devices_farm_kind_idx ON devices (farm_id, kind);
