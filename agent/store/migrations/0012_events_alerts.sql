-- The event log and threshold alerts (issues 4 and 5).
--
-- events has the cloud's columns (cloud migration 0003, table events) so a synced event is stored
-- there as it is here. Timestamps are ISO 8601 UTC text with milliseconds and a trailing Z, which
-- sorts like time. An event outlives its device: device_id carries no foreign key.

CREATE TABLE events (
    id              TEXT PRIMARY KEY,
    farm_id         TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    device_id       TEXT,
    kind            TEXT NOT NULL,
    severity        TEXT NOT NULL
        CHECK (severity IN ('debug', 'info', 'warning', 'error', 'critical')),
    message         TEXT NOT NULL DEFAULT '',
    data            TEXT NOT NULL DEFAULT '{}',
    ts              TEXT NOT NULL,
    acknowledged_at TEXT,
    acknowledged_by TEXT
);
CREATE INDEX events_farm_ts ON events(farm_id, ts);
-- Retention and the admin's unfiltered list walk the whole log by time.
CREATE INDEX events_ts ON events(ts);

-- Sync (docs/design.md, section 8): events are priority records, lane 0, like 0008's triggers.
-- Retention deletes are not synced: the cloud keeps its own history.
CREATE TRIGGER outbox_events_insert AFTER INSERT ON events
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'event', 'events', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'device_id', NEW.device_id, 'kind', NEW.kind, 'severity', NEW.severity, 'message', NEW.message, 'data', json(NEW.data), 'ts', NEW.ts, 'acknowledged_at', NEW.acknowledged_at, 'acknowledged_by', NEW.acknowledged_by) AS p);
END;

CREATE TRIGGER outbox_events_acknowledge AFTER UPDATE OF acknowledged_at, acknowledged_by ON events
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'event', 'events', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'device_id', NEW.device_id, 'kind', NEW.kind, 'severity', NEW.severity, 'message', NEW.message, 'data', json(NEW.data), 'ts', NEW.ts, 'acknowledged_at', NEW.acknowledged_at, 'acknowledged_by', NEW.acknowledged_by) AS p);
END;

-- Threshold rules: one device's metric, raised above ``above`` and/or below ``below`` after the
-- value stayed beyond for ``min_duration_s``; cleared once back inside by ``hysteresis``.
CREATE TABLE alert_rules (
    id             TEXT PRIMARY KEY,
    farm_id        TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    device_id      TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    metric         TEXT NOT NULL,
    name           TEXT NOT NULL DEFAULT '',
    above          REAL,
    below          REAL,
    hysteresis     REAL NOT NULL DEFAULT 0 CHECK (hysteresis >= 0),
    min_duration_s REAL NOT NULL DEFAULT 0 CHECK (min_duration_s >= 0),
    severity       TEXT NOT NULL
        CHECK (severity IN ('debug', 'info', 'warning', 'error', 'critical')),
    enabled        INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    created_by     TEXT,
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    CHECK (above IS NOT NULL OR below IS NOT NULL),
    CHECK (above IS NULL OR below IS NULL OR below < above)
);
CREATE INDEX alert_rules_farm ON alert_rules(farm_id);
CREATE INDEX alert_rules_device ON alert_rules(device_id);

-- Alerts raised by the rules; at most one active per rule. The evaluator reloads the active ones
-- at start, so an alert outlives a restart. Deleting a rule keeps its past alerts (rule_id NULL).
CREATE TABLE alerts (
    id            TEXT PRIMARY KEY,
    rule_id       TEXT REFERENCES alert_rules(id) ON DELETE SET NULL,
    farm_id       TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    device_id     TEXT NOT NULL,
    metric        TEXT NOT NULL,
    direction     TEXT NOT NULL CHECK (direction IN ('above', 'below')),
    threshold     REAL NOT NULL,
    severity      TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('active', 'cleared')),
    raised_at     TEXT NOT NULL,
    raised_value  REAL NOT NULL,
    cleared_at    TEXT,
    cleared_value REAL,
    cleared_reason TEXT
);
CREATE UNIQUE INDEX alerts_one_active ON alerts(rule_id) WHERE state = 'active';
CREATE INDEX alerts_farm_state ON alerts(farm_id, state, raised_at);
