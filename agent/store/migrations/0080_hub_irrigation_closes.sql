-- Irrigation closes promised by POST /api/v1/home-automation/irrigation/control with a duration
-- (issue 11): written before the hub opens the valve, removed only once the hub took the close,
-- so a restart or kill -9 never loses one. At most one per hub entity; not synced (the hub and
-- its timers are the agent's own). farm_id names the farm whose event log records the close; it
-- is no foreign key, so deleting the farm never cancels a close.
CREATE TABLE hub_irrigation_closes (
    id TEXT PRIMARY KEY,
    entity_id TEXT NOT NULL UNIQUE,
    farm_id TEXT NOT NULL,
    close_at TEXT NOT NULL,
    requested_by TEXT,
    next_try_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error TEXT
);
CREATE INDEX hub_irrigation_closes_next ON hub_irrigation_closes (next_try_at);
