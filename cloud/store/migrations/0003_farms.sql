-- Agents, farms, per-farm permissions and the synced mirror of agent data (docs/design.md, section 8).
--
-- Identifiers of mirrored rows are the agent's own UUIDs, so a sync batch upserts by id.
-- Every farm-scoped table carries farm_id, and composite foreign keys (parent id, farm_id) make it
-- impossible to hang a child of one farm under a parent of another: row-level security can then
-- decide on farm_id alone. Deleting a farm cascades down the whole hierarchy.

CREATE TABLE agents (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL,
    owner_id uuid REFERENCES users (id) ON DELETE SET NULL,
    -- Raw 32-byte Ed25519 public key (RFC 8032 section 5.1.5), registered at pairing.
    public_key bytea CHECK (public_key IS NULL OR octet_length(public_key) = 32),
    pairing_code_hash bytea UNIQUE,
    pairing_expires_at timestamptz,
    paired_at timestamptz,
    last_seen_at timestamptz,
    -- Highest contiguous outbox sequence committed here; what the answer to a batch carries.
    acked_seq bigint NOT NULL DEFAULT 0 CHECK (acked_seq >= 0),
    revoked_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((pairing_code_hash IS NULL) = (pairing_expires_at IS NULL)),
    CHECK (paired_at IS NULL OR public_key IS NOT NULL)
);
CREATE INDEX agents_owner_idx ON agents (owner_id);

-- One row per applied outbox record: applying a batch again changes nothing. Rows at or below
-- agents.acked_seq may be pruned.
CREATE TABLE sync_receipts (
    agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    seq bigint NOT NULL CHECK (seq > 0),
    kind text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, seq)
);

CREATE TABLE farms (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The creator (docs/design.md, section 4: a user reads the farms whose user_id is theirs).
    -- Deleting the creator keeps the farm: admins and permission holders still reach it.
    user_id uuid REFERENCES users (id) ON DELETE SET NULL,
    agent_id uuid REFERENCES agents (id) ON DELETE SET NULL,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    location text NOT NULL DEFAULT '',
    status text NOT NULL DEFAULT 'active',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX farms_user_idx ON farms (user_id);
CREATE INDEX farms_agent_idx ON farms (agent_id);

CREATE TABLE permissions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    permission_type text NOT NULL CHECK (permission_type IN ('read_write', 'read_only')),
    resource_type text NOT NULL DEFAULT 'farm' CHECK (resource_type = 'farm'),
    granted_at timestamptz NOT NULL DEFAULT now(),
    granted_by uuid REFERENCES users (id) ON DELETE SET NULL,
    UNIQUE (user_id, farm_id)
);
CREATE INDEX permissions_farm_idx ON permissions (farm_id);

CREATE TABLE rows (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    name text NOT NULL,
    position integer NOT NULL DEFAULT 0,
    status text NOT NULL DEFAULT 'active',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, farm_id)
);
CREATE INDEX rows_farm_idx ON rows (farm_id, position);

CREATE TABLE racks (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    farm_id uuid NOT NULL,
    row_id uuid NOT NULL,
    name text NOT NULL,
    position integer NOT NULL DEFAULT 0,
    height_cm double precision CHECK (height_cm > 0),
    width_cm double precision CHECK (width_cm > 0),
    depth_cm double precision CHECK (depth_cm > 0),
    status text NOT NULL DEFAULT 'active',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, farm_id),
    FOREIGN KEY (row_id, farm_id) REFERENCES rows (id, farm_id) ON DELETE CASCADE
);
CREATE INDEX racks_row_idx ON racks (row_id, farm_id);

CREATE TABLE shelves (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    farm_id uuid NOT NULL,
    rack_id uuid NOT NULL,
    name text NOT NULL,
    level integer NOT NULL DEFAULT 0,
    plant_capacity integer NOT NULL DEFAULT 0 CHECK (plant_capacity >= 0),
    current_species text,
    current_plant_count integer NOT NULL DEFAULT 0 CHECK (current_plant_count >= 0),
    status text NOT NULL DEFAULT 'active',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, farm_id),
    FOREIGN KEY (rack_id, farm_id) REFERENCES racks (id, farm_id) ON DELETE CASCADE
);
CREATE INDEX shelves_rack_idx ON shelves (rack_id, farm_id);

-- One device registry (docs/design.md, section 5); sensors and fans are views of it.
CREATE TABLE devices (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    shelf_id uuid,
    name text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('sensor', 'fan', 'light', 'pump', 'valve')),
    device_type text NOT NULL,
    location text NOT NULL DEFAULT '',
    status text NOT NULL DEFAULT 'offline',
    firmware_profile text,
    -- MQTT topic base or serial port and settings, as the firmware profile expects them.
    address jsonb NOT NULL DEFAULT '{}',
    mac_address text,
    firmware_version text,
    battery_level integer CHECK (battery_level BETWEEN 0 AND 100),
    last_reading timestamptz,
    calibration_data jsonb NOT NULL DEFAULT '{}',
    current_speed integer,
    max_speed integer,
    power_consumption double precision,
    runtime_hours double precision,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, farm_id),
    -- Removing a shelf unplaces its devices rather than deleting them.
    FOREIGN KEY (shelf_id, farm_id) REFERENCES shelves (id, farm_id) ON DELETE SET NULL (shelf_id)
);
CREATE INDEX devices_farm_idx ON devices (farm_id);
CREATE INDEX devices_shelf_idx ON devices (shelf_id, farm_id);

-- Raw readings. The key makes a re-sent reading an upsert of the same row.
CREATE TABLE readings (
    device_id uuid NOT NULL,
    metric text NOT NULL,
    ts timestamptz NOT NULL,
    farm_id uuid NOT NULL,
    agent_id uuid,
    value double precision NOT NULL,
    unit text NOT NULL DEFAULT '',
    -- The agent's receive time, kept when it differs from the device's own time by more than
    -- the configured skew (docs/design.md, section 6).
    received_at timestamptz,
    PRIMARY KEY (device_id, metric, ts),
    FOREIGN KEY (device_id, farm_id) REFERENCES devices (id, farm_id) ON DELETE CASCADE
);

CREATE TABLE rollups (
    device_id uuid NOT NULL,
    metric text NOT NULL,
    resolution text NOT NULL CHECK (resolution IN ('1m', '1h')),
    bucket timestamptz NOT NULL,
    farm_id uuid NOT NULL,
    agent_id uuid,
    min double precision NOT NULL,
    max double precision NOT NULL,
    mean double precision NOT NULL,
    count integer NOT NULL CHECK (count > 0),
    unit text NOT NULL DEFAULT '',
    PRIMARY KEY (device_id, metric, resolution, bucket),
    FOREIGN KEY (device_id, farm_id) REFERENCES devices (id, farm_id) ON DELETE CASCADE,
    CHECK (min <= mean AND mean <= max)
);

-- Device events and alerts. An event outlives its device: removing the device unlinks it.
CREATE TABLE events (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    device_id uuid,
    agent_id uuid,
    kind text NOT NULL,
    severity text NOT NULL DEFAULT 'info'
        CHECK (severity IN ('debug', 'info', 'warning', 'error', 'critical')),
    message text NOT NULL DEFAULT '',
    data jsonb NOT NULL DEFAULT '{}',
    ts timestamptz NOT NULL,
    acknowledged_at timestamptz,
    acknowledged_by uuid,
    FOREIGN KEY (device_id, farm_id) REFERENCES devices (id, farm_id) ON DELETE SET NULL (device_id)
);
CREATE INDEX events_farm_ts_idx ON events (farm_id, ts DESC);
CREATE INDEX events_device_idx ON events (device_id, farm_id);

-- Calibration history; the active one per device and metric is applied to readings.
CREATE TABLE calibrations (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    farm_id uuid NOT NULL,
    device_id uuid NOT NULL,
    metric text NOT NULL,
    -- 'device': stored on the device (EZO); 'agent': a linear fit applied by the agent.
    method text NOT NULL CHECK (method IN ('device', 'agent')),
    points jsonb NOT NULL DEFAULT '[]',
    slope double precision,
    intercept double precision,
    active boolean NOT NULL DEFAULT false,
    -- A user id of the cloud or of the agent before pairing, hence no foreign key.
    performed_by uuid,
    performed_at timestamptz NOT NULL,
    FOREIGN KEY (device_id, farm_id) REFERENCES devices (id, farm_id) ON DELETE CASCADE
);
CREATE INDEX calibrations_device_idx ON calibrations (device_id, farm_id, performed_at DESC);
CREATE UNIQUE INDEX calibrations_active_key ON calibrations (device_id, metric) WHERE active;

CREATE TABLE grow_plans (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    shelf_id uuid,
    name text NOT NULL,
    species text NOT NULL DEFAULT '',
    status text NOT NULL DEFAULT 'planned',
    started_at timestamptz,
    expected_harvest_at timestamptz,
    -- Stages with their durations and targets, as the agent defines them.
    stages jsonb NOT NULL DEFAULT '[]',
    notes text NOT NULL DEFAULT '',
    created_by uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (shelf_id, farm_id) REFERENCES shelves (id, farm_id) ON DELETE SET NULL (shelf_id)
);
CREATE INDEX grow_plans_farm_idx ON grow_plans (farm_id);
CREATE INDEX grow_plans_shelf_idx ON grow_plans (shelf_id, farm_id);

-- Climate settings with their history: the newest row of a farm is the current one.
CREATE TABLE climate_settings (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    settings jsonb NOT NULL,
    changed_by uuid,
    changed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX climate_settings_farm_idx ON climate_settings (farm_id, changed_at DESC);
