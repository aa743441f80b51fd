-- Grow plans (issue 4): a crop on one or more shelves of a farm, from start date to harvest.
-- status: planned -> active -> harvested, planned|active -> cancelled (protocol/schemas/grow_plans.py
-- TRANSITIONS). stages is the JSON list of the plan's own stages, copied from the crop catalogue at
-- create unless the plan gave its own, so a later catalogue edit never changes a running plan.
CREATE TABLE grow_plans (
    id                  TEXT PRIMARY KEY,
    farm_id             TEXT NOT NULL REFERENCES farms(id) ON DELETE CASCADE,
    species             TEXT NOT NULL,
    species_name        TEXT NOT NULL,
    custom              INTEGER NOT NULL CHECK (custom IN (0, 1)),
    plant_count         INTEGER NOT NULL CHECK (plant_count > 0),
    start_date          TEXT NOT NULL,
    stages              TEXT NOT NULL,
    total_days          INTEGER NOT NULL CHECK (total_days > 0),
    status              TEXT NOT NULL
                        CHECK (status IN ('planned', 'active', 'harvested', 'cancelled')),
    notes               TEXT NOT NULL DEFAULT '',
    created_by          TEXT,
    started_at          TEXT,
    ended_at            TEXT,
    -- Set once, in the transaction that claims the harvest-ready notice, so it fires once a plan.
    harvest_notified_at TEXT,
    created_at          TEXT NOT NULL,
    updated_at          TEXT NOT NULL
);
CREATE INDEX grow_plans_farm ON grow_plans(farm_id, status);
CREATE INDEX grow_plans_active ON grow_plans(status, harvest_notified_at);

-- The shelves of a plan and each one's share of its plants. The plan reference is deferred so the
-- store writes a plan's shelves before the plan row, whose outbox trigger then sees them.
CREATE TABLE grow_plan_shelves (
    plan_id     TEXT NOT NULL REFERENCES grow_plans(id) ON DELETE CASCADE
                DEFERRABLE INITIALLY DEFERRED,
    shelf_id    TEXT NOT NULL REFERENCES shelves(id) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    plant_count INTEGER NOT NULL CHECK (plant_count >= 0),
    PRIMARY KEY (plan_id, shelf_id)
) WITHOUT ROWID;
CREATE INDEX grow_plan_shelves_shelf ON grow_plan_shelves(shelf_id);

-- Sync (docs/design.md, section 8): plans are configuration, lane 0, like 0008's triggers. The payload
-- carries the shelves, so the cloud mirror needs no second entity; shelf changes made by a plan
-- sync through 0008's shelf triggers.
CREATE TRIGGER outbox_grow_plans_insert AFTER INSERT ON grow_plans
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'grow_plans', 'grow_plans', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'species', NEW.species, 'species_name', NEW.species_name, 'custom', NEW.custom, 'plant_count', NEW.plant_count, 'start_date', NEW.start_date, 'stages', json(NEW.stages), 'total_days', NEW.total_days, 'status', NEW.status, 'notes', NEW.notes, 'created_by', NEW.created_by, 'started_at', NEW.started_at, 'ended_at', NEW.ended_at, 'harvest_notified_at', NEW.harvest_notified_at, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at, 'shelves', (SELECT json_group_array(json_object('shelf_id', shelf_id, 'plant_count', plant_count)) FROM (SELECT shelf_id, plant_count FROM grow_plan_shelves WHERE plan_id = NEW.id ORDER BY position))) AS p);
END;

CREATE TRIGGER outbox_grow_plans_update AFTER UPDATE ON grow_plans
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'grow_plans', 'grow_plans', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'species', NEW.species, 'species_name', NEW.species_name, 'custom', NEW.custom, 'plant_count', NEW.plant_count, 'start_date', NEW.start_date, 'stages', json(NEW.stages), 'total_days', NEW.total_days, 'status', NEW.status, 'notes', NEW.notes, 'created_by', NEW.created_by, 'started_at', NEW.started_at, 'ended_at', NEW.ended_at, 'harvest_notified_at', NEW.harvest_notified_at, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at, 'shelves', (SELECT json_group_array(json_object('shelf_id', shelf_id, 'plant_count', plant_count)) FROM (SELECT shelf_id, plant_count FROM grow_plan_shelves WHERE plan_id = NEW.id ORDER BY position))) AS p);
END;

CREATE TRIGGER outbox_grow_plans_delete AFTER DELETE ON grow_plans
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'grow_plans', 'grow_plans', OLD.id, 'delete', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', OLD.id, 'farm_id', OLD.farm_id) AS p);
END;
