-- Readings and their rollups reference their device by one check per statement instead of a
-- foreign key (docs/decisions.md, issue 14): the key's trigger ran a locking lookup of
-- `devices` for every row, about two thirds of inserting a 50,000-reading batch. What the keys
-- guaranteed holds:
--
-- - an inserted or updated row names a device of its farm (else SQLSTATE 23503,
--   foreign_key_violation, as the key raised), and the devices it names are locked FOR KEY
--   SHARE, as the key locked them, so a device deleted meanwhile waits for the inserting
--   transaction and then takes its rows with it;
-- - deleting a device deletes its readings and rollups (the keys' ON DELETE CASCADE);
-- - a device's id or farm cannot change while it has readings or rollups (the keys' NO ACTION).
--
-- The checks run with the caller's rights: a caller sees the devices of the farms it may
-- write, the only ones it may insert readings for.

DO $$
DECLARE
    tbl text;
    name text;
BEGIN
    FOREACH tbl IN ARRAY ARRAY['readings', 'reading_rollups'] LOOP
        FOR name IN
            SELECT conname FROM pg_constraint
            WHERE conrelid = tbl::regclass AND contype = 'f' AND conparentid = 0
        LOOP
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', tbl, name);
        END LOOP;
    END LOOP;
END
$$;

CREATE FUNCTION rows_check_devices() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stray record;
BEGIN
    PERFORM 1 FROM devices AS d
    WHERE (d.id, d.farm_id) IN (SELECT device_id, farm_id FROM written)
    FOR KEY SHARE OF d;
    SELECT w.device_id, w.farm_id INTO stray
    FROM (SELECT DISTINCT device_id, farm_id FROM written) AS w
    WHERE NOT EXISTS (SELECT 1 FROM devices AS d WHERE d.id = w.device_id AND d.farm_id = w.farm_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "%" names device % not on farm %',
            TG_TABLE_NAME, stray.device_id, stray.farm_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER readings_device_inserted AFTER INSERT ON readings
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION rows_check_devices();
CREATE TRIGGER readings_device_updated AFTER UPDATE ON readings
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION rows_check_devices();
CREATE TRIGGER rollups_device_inserted AFTER INSERT ON reading_rollups
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION rows_check_devices();
CREATE TRIGGER rollups_device_updated AFTER UPDATE ON reading_rollups
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION rows_check_devices();

-- The cascade runs as the schema owner, whatever deleted the device (a farm's own cascade, a
-- user, sync): the owner's only policies on these tables let it find and delete rows (a
-- DELETE that reads columns needs both), and only this trigger runs as the owner on them.
CREATE POLICY owner_cascade_find ON readings FOR SELECT TO CURRENT_USER USING (true);
CREATE POLICY owner_cascade ON readings FOR DELETE TO CURRENT_USER USING (true);
CREATE POLICY owner_cascade_find ON reading_rollups FOR SELECT TO CURRENT_USER USING (true);
CREATE POLICY owner_cascade ON reading_rollups FOR DELETE TO CURRENT_USER USING (true);
CREATE FUNCTION rows_of_deleted_devices() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    DELETE FROM readings AS r USING gone AS g WHERE r.device_id = g.id AND r.farm_id = g.farm_id;
    DELETE FROM reading_rollups AS r USING gone AS g
    WHERE r.device_id = g.id AND r.farm_id = g.farm_id;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION rows_of_deleted_devices() FROM PUBLIC;
CREATE TRIGGER devices_delete_readings AFTER DELETE ON devices
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION rows_of_deleted_devices();

CREATE FUNCTION devices_keep_reading_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM readings WHERE device_id = OLD.id AND farm_id = OLD.farm_id)
        OR EXISTS (SELECT 1 FROM reading_rollups WHERE device_id = OLD.id AND farm_id = OLD.farm_id)
    THEN
        RAISE EXCEPTION 'device % still has readings on farm %', OLD.id, OLD.farm_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER devices_reading_keys BEFORE UPDATE OF id, farm_id ON devices
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.farm_id IS DISTINCT FROM NEW.farm_id)
    EXECUTE FUNCTION devices_keep_reading_keys();
