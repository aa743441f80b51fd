-- The device check of readings and rollups (0091_readings_device_check.sql) probes each device a
-- statement names by its primary key, once (issue 14). It joined the statement's rows with the
-- whole of `devices`: a batch names the few hundred sensors of one farm, and PostgreSQL hashed
-- them and read every device of the cloud (25,000 in a 50-agent fleet bench, 100,000 at the
-- issue's size), three times a batch (its readings, and its rollups inserted and updated), and
-- a second time to look for a stray. Locking and checking are now one pass: each distinct
-- (device, farm) the rows name looks its device up by id and locks it FOR KEY SHARE, as the
-- foreign key did, and a device missing or on another farm is the stray. What the check
-- guarantees is unchanged.
CREATE OR REPLACE FUNCTION rows_check_devices() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stray record;
BEGIN
    SELECT w.device_id, w.farm_id INTO stray
    FROM (SELECT DISTINCT device_id, farm_id FROM written) AS w
    LEFT JOIN LATERAL (
        SELECT d.farm_id FROM devices AS d WHERE d.id = w.device_id FOR KEY SHARE OF d
    ) AS d ON true
    WHERE d.farm_id IS DISTINCT FROM w.farm_id
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "%" names device % not on farm %',
            TG_TABLE_NAME, stray.device_id, stray.farm_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;
