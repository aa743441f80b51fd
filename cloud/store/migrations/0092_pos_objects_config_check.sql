-- The POS mirror references its configuration by one check per statement instead of a foreign
-- key, and keeps the provider's text (json) instead of jsonb (docs/decisions.md, issue 10): of a
-- 1,000-order page's write, the key's trigger (a locking lookup of pos_configs per row) took
-- about a quarter, and building jsonb (each object's keys sorted, its binary form) about another
-- quarter; nothing reads inside the stored objects, which go back to the API as they came. What
-- the key guaranteed holds, as 0091 does for readings:
--
-- - an inserted or updated row names a configuration of its owner (else SQLSTATE 23503,
--   foreign_key_violation, as the key raised), and the configurations it names are locked FOR
--   KEY SHARE, as the key locked them: once per statement (a sync's page) instead of per row,
--   so a configuration deleted meanwhile waits for the writing transaction and then takes its
--   rows with it;
-- - deleting a configuration (or its owner) deletes its mirror (the key's ON DELETE CASCADE);
-- - a configuration's id or owner cannot change while it has mirrored objects (NO ACTION).
--
-- The check runs with the caller's rights: a caller sees the configurations it may write for
-- (the system path all of them, an owner their own).

DO $$
DECLARE
    name text;
BEGIN
    FOR name IN
        SELECT conname FROM pg_constraint
        WHERE conrelid = 'pos_objects'::regclass AND contype = 'f'
    LOOP
        EXECUTE format('ALTER TABLE pos_objects DROP CONSTRAINT %I', name);
    END LOOP;
END
$$;

ALTER TABLE pos_objects ALTER COLUMN data TYPE json USING data::json;

CREATE FUNCTION pos_objects_check_configs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stray record;
BEGIN
    PERFORM 1 FROM pos_configs AS c
    WHERE (c.id, c.owner_id) IN (SELECT config_id, owner_id FROM written)
    FOR KEY SHARE OF c;
    SELECT w.config_id, w.owner_id INTO stray
    FROM (SELECT DISTINCT config_id, owner_id FROM written) AS w
    WHERE NOT EXISTS (
        SELECT 1 FROM pos_configs AS c WHERE c.id = w.config_id AND c.owner_id = w.owner_id
    )
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "pos_objects" names configuration % not of owner %',
            stray.config_id, stray.owner_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER pos_objects_config_inserted AFTER INSERT ON pos_objects
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT
    EXECUTE FUNCTION pos_objects_check_configs();
CREATE TRIGGER pos_objects_config_updated AFTER UPDATE ON pos_objects
    REFERENCING NEW TABLE AS written FOR EACH STATEMENT
    EXECUTE FUNCTION pos_objects_check_configs();

-- The cascade runs as the schema owner, whatever deleted the configuration (its owner on the
-- user path, a user's own cascade, the system path): the owner's only policies on pos_objects
-- let it find and delete rows, and only this trigger runs as the owner on them.
CREATE POLICY owner_cascade_find ON pos_objects FOR SELECT TO CURRENT_USER USING (true);
CREATE POLICY owner_cascade ON pos_objects FOR DELETE TO CURRENT_USER USING (true);
CREATE FUNCTION pos_objects_of_deleted_configs() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    DELETE FROM pos_objects AS o USING gone AS g
    WHERE o.config_id = g.id AND o.owner_id = g.owner_id;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION pos_objects_of_deleted_configs() FROM PUBLIC;
CREATE TRIGGER pos_configs_delete_objects AFTER DELETE ON pos_configs
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION pos_objects_of_deleted_configs();

CREATE FUNCTION pos_configs_keep_object_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pos_objects WHERE config_id = OLD.id AND owner_id = OLD.owner_id
    ) THEN
        RAISE EXCEPTION 'configuration % still has mirrored objects of owner %',
            OLD.id, OLD.owner_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER pos_configs_object_keys BEFORE UPDATE OF id, owner_id ON pos_configs
    FOR EACH ROW
    WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.owner_id IS DISTINCT FROM NEW.owner_id)
    EXECUTE FUNCTION pos_configs_keep_object_keys();
