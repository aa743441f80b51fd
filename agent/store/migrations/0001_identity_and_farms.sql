-- Identity (docs/design.md, section 4) and the farm hierarchy (docs/design.md, section 12:
-- farms, rows, racks, shelves).
-- Timestamps are ISO 8601 UTC text with milliseconds and a trailing Z, as the API writes them.

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    email          TEXT NOT NULL UNIQUE COLLATE NOCASE,
    password_hash  TEXT NOT NULL,
    role           TEXT NOT NULL CHECK (role IN ('admin','farm_manager','operator','analyst','user')),
    status         TEXT NOT NULL DEFAULT 'active',
    plan           TEXT NOT NULL DEFAULT 'standard' CHECK (plan IN ('standard','premium')),
    full_name      TEXT NOT NULL DEFAULT '',
    email_verified INTEGER NOT NULL DEFAULT 0,
    mfa_secret     TEXT,
    mfa_enabled    INTEGER NOT NULL DEFAULT 0,
    -- The last TOTP time step accepted, so a code cannot be replayed (RFC 6238 section 5.2).
    mfa_last_step  INTEGER,
    origin         TEXT NOT NULL DEFAULT 'local',
    last_login     TEXT,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL
);

CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL,
    revoked_at    TEXT,
    revoke_reason TEXT
);
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE refresh_tokens (
    token_hash  TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    used_at     TEXT
);
CREATE INDEX refresh_tokens_session ON refresh_tokens(session_id);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    key_hash     TEXT NOT NULL UNIQUE,
    created_by   TEXT REFERENCES users(id) ON DELETE SET NULL,
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at   TEXT
);
CREATE INDEX api_keys_user ON api_keys(user_id);

CREATE TABLE one_time_tokens (
    token_hash TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    purpose    TEXT NOT NULL CHECK (purpose IN ('verify_email','reset_password','mfa_challenge')),
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at    TEXT
);
CREATE INDEX one_time_tokens_user ON one_time_tokens(user_id, purpose);

CREATE TABLE auth_events (
    id         TEXT PRIMARY KEY,
    user_id    TEXT REFERENCES users(id) ON DELETE SET NULL,
    email      TEXT,
    kind       TEXT NOT NULL,
    address    TEXT,
    detail     TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
CREATE INDEX auth_events_time ON auth_events(created_at);
CREATE INDEX auth_events_user ON auth_events(user_id);
-- Login throttling counts recent failures per account and per address from this table.
CREATE INDEX auth_events_email ON auth_events(email, created_at);
CREATE INDEX auth_events_address ON auth_events(address, created_at);

CREATE TABLE farms (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    location    TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL,
    created_by  TEXT REFERENCES users(id) ON DELETE SET NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX farms_name ON farms(name COLLATE NOCASE);
CREATE INDEX farms_creator ON farms(created_by);

CREATE TABLE permissions (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    farm_id         TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    permission_type TEXT NOT NULL CHECK (permission_type IN ('read_write','read_only')),
    resource_type   TEXT NOT NULL DEFAULT 'farm',
    granted_at      TEXT NOT NULL,
    granted_by      TEXT REFERENCES users(id) ON DELETE SET NULL,
    UNIQUE (user_id, farm_id)
);
CREATE INDEX permissions_farm ON permissions(farm_id);

-- "rows" is an SQL keyword (window frames), hence farm_rows.
CREATE TABLE farm_rows (
    id         TEXT PRIMARY KEY,
    farm_id    TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    position   INTEGER NOT NULL,
    status     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
-- A position names one row of a farm (409 RESOURCE_EXISTS on a duplicate); likewise below.
CREATE UNIQUE INDEX farm_rows_position ON farm_rows(farm_id, position);

-- farm_id is carried down the hierarchy so farm-scoped queries and metrics need no joins;
-- parents are immutable after create, so it never goes stale.
CREATE TABLE racks (
    id         TEXT PRIMARY KEY,
    row_id     TEXT NOT NULL REFERENCES farm_rows(id) ON DELETE CASCADE,
    farm_id    TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    position   INTEGER NOT NULL,
    height_cm  REAL,
    width_cm   REAL,
    depth_cm   REAL,
    status     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX racks_position ON racks(row_id, position);
CREATE INDEX racks_farm ON racks(farm_id);

CREATE TABLE shelves (
    id                  TEXT PRIMARY KEY,
    rack_id             TEXT NOT NULL REFERENCES racks(id) ON DELETE CASCADE,
    row_id              TEXT NOT NULL REFERENCES farm_rows(id) ON DELETE CASCADE,
    farm_id             TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    name                TEXT NOT NULL,
    level               INTEGER NOT NULL,
    plant_capacity      INTEGER NOT NULL DEFAULT 0,
    current_species     TEXT,
    current_plant_count INTEGER NOT NULL DEFAULT 0,
    status              TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL,
    -- A shelf holds no more plants than it has room for; a PUT breaking this is a 422.
    CONSTRAINT shelf_plant_count CHECK (current_plant_count BETWEEN 0 AND plant_capacity)
);
CREATE UNIQUE INDEX shelves_level ON shelves(rack_id, level);
CREATE INDEX shelves_row ON shelves(row_id);
CREATE INDEX shelves_farm ON shelves(farm_id);

-- The device registry (docs/design.md, section 5); the devices issue adds transport columns.
CREATE TABLE devices (
    id          TEXT PRIMARY KEY,
    farm_id     TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('sensor','fan','light','pump','valve')),
    device_type TEXT NOT NULL,
    location    TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL DEFAULT 'offline',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX devices_farm ON devices(farm_id, kind);
