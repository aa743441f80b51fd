-- A harvest's quantity and unit (issue 10): set when a plan becomes harvested, synced to the
-- cloud, where a mapped crop adds it to the shop's POS inventory. The outbox triggers of 0011
-- are recreated to carry the two fields.
ALTER TABLE grow_plans ADD COLUMN harvested_quantity REAL
    CHECK (harvested_quantity IS NULL OR harvested_quantity > 0);
ALTER TABLE grow_plans ADD COLUMN harvest_unit TEXT
    CHECK (harvest_unit IS NULL OR harvest_unit IN ('g', 'kg', 'lb', 'oz', 'each', 'bunch'));

DROP TRIGGER outbox_grow_plans_insert;
DROP TRIGGER outbox_grow_plans_update;

CREATE TRIGGER outbox_grow_plans_insert AFTER INSERT ON grow_plans
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'grow_plans', 'grow_plans', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'species', NEW.species, 'species_name', NEW.species_name, 'custom', NEW.custom, 'plant_count', NEW.plant_count, 'start_date', NEW.start_date, 'stages', json(NEW.stages), 'total_days', NEW.total_days, 'status', NEW.status, 'notes', NEW.notes, 'created_by', NEW.created_by, 'started_at', NEW.started_at, 'ended_at', NEW.ended_at, 'harvest_notified_at', NEW.harvest_notified_at, 'harvested_quantity', NEW.harvested_quantity, 'harvest_unit', NEW.harvest_unit, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at, 'shelves', (SELECT json_group_array(json_object('shelf_id', shelf_id, 'plant_count', plant_count)) FROM (SELECT shelf_id, plant_count FROM grow_plan_shelves WHERE plan_id = NEW.id ORDER BY position))) AS p);
END;

CREATE TRIGGER outbox_grow_plans_update AFTER UPDATE ON grow_plans
BEGIN
    INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)
    SELECT 0, 'grow_plans', 'grow_plans', NEW.id, 'upsert', p, length(p),
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM (SELECT json_object('id', NEW.id, 'farm_id', NEW.farm_id, 'species', NEW.species, 'species_name', NEW.species_name, 'custom', NEW.custom, 'plant_count', NEW.plant_count, 'start_date', NEW.start_date, 'stages', json(NEW.stages), 'total_days', NEW.total_days, 'status', NEW.status, 'notes', NEW.notes, 'created_by', NEW.created_by, 'started_at', NEW.started_at, 'ended_at', NEW.ended_at, 'harvest_notified_at', NEW.harvest_notified_at, 'harvested_quantity', NEW.harvested_quantity, 'harvest_unit', NEW.harvest_unit, 'created_at', NEW.created_at, 'updated_at', NEW.updated_at, 'shelves', (SELECT json_group_array(json_object('shelf_id', shelf_id, 'plant_count', plant_count)) FROM (SELECT shelf_id, plant_count FROM grow_plan_shelves WHERE plan_id = NEW.id ORDER BY position))) AS p);
END;
