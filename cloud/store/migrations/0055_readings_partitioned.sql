-- Readings partitioned by month of their time (PostgreSQL declarative partitioning), and their
-- 1-minute and 1-hour rollups kept as batches are applied (docs/scaling.md).
--
-- - `readings` becomes a table partitioned by RANGE (ts): one partition a month, made ahead of
--   time by the maintenance job (readings_ensure_partitions), dropped whole by retention
--   (readings_drop_partitions_before) instead of deleting rows. A reading whose month has no
--   partition (a device clock years off) lands in readings_default; making its month's
--   partition later moves such rows into it.
-- - `reading_rollups` holds, per device, metric and minute or hour, every reading received,
--   whichever form it came in (raw, or the agent's own 1-minute and 1-hour rollups): min, max,
--   sum and count. Statement triggers add to it from the rows each statement really inserted
--   (a re-sent reading, skipped by ON CONFLICT DO NOTHING, is not counted twice) or by how much
--   a merged rollup grew. Raw readings dropped by retention keep their rollups.
-- - The distribution column of a future Citus cluster, farm_id, is part of every key.
-- - Existing readings and rollups are converted here.

-- 1. The partitioned table next to the old one, with the old one's rows moved over.
ALTER TABLE readings RENAME TO readings_unpartitioned;
ALTER INDEX readings_pkey RENAME TO readings_unpartitioned_pkey;
-- The schema owner moves the rows: it is subject to RLS (FORCE) and has no policy of its own.
ALTER TABLE readings_unpartitioned NO FORCE ROW LEVEL SECURITY;

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
    PRIMARY KEY (device_id, metric, ts, farm_id),
    FOREIGN KEY (device_id, farm_id) REFERENCES devices (id, farm_id) ON DELETE CASCADE
) PARTITION BY RANGE (ts);

CREATE TABLE readings_default PARTITION OF readings DEFAULT;

-- Partitions are made by the maintenance job on the system role, which owns nothing: these
-- functions run as the schema owner (SECURITY DEFINER) and take nothing but times.
CREATE FUNCTION readings_add_partition(month_start timestamptz) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    first timestamptz := date_trunc('month', month_start, 'UTC');
    next timestamptz := first + interval '1 month';
    name text := 'readings_' || to_char(first AT TIME ZONE 'UTC', 'YYYYMM');
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN 0;
    END IF;
    -- Rows of this month that fell into the default partition wait aside while the partition is
    -- made (the default partition may hold none of its range), then go in. Attaching a filled
    -- table instead would validate its foreign key with a query that FORCE ROW LEVEL SECURITY
    -- blinds for the owner; a row inserted is checked by the key's own trigger, which is not.
    ALTER TABLE readings_default NO FORCE ROW LEVEL SECURITY;
    CREATE TEMPORARY TABLE readings_moving ON COMMIT DROP AS
        WITH moved AS (DELETE FROM readings_default WHERE ts >= first AND ts < next RETURNING *)
        SELECT * FROM moved;
    ALTER TABLE readings_default FORCE ROW LEVEL SECURITY;
    EXECUTE format(
        'CREATE TABLE %I PARTITION OF readings FOR VALUES FROM (%L) TO (%L)', name, first, next
    );
    -- Straight into the partition: the rows were counted in the rollups when they first came.
    EXECUTE format('INSERT INTO %I SELECT * FROM readings_moving', name);
    DROP TABLE readings_moving;
    -- A partition is reached through `readings` (whose grants and policies apply); on its own
    -- it is closed to the service roles, and forced under RLS like every table.
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', name);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', name);
    RETURN 1;
END
$$;

-- This month's partition and the next `months_ahead`, and one for every month that has readings
-- waiting in the default partition (an agent's backlog from before the cloud's first month, a
-- device clock far off), which moves them in.
CREATE FUNCTION readings_ensure_partitions(months_ahead integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    made integer := 0;
    months timestamptz[];
    month timestamptz;
BEGIN
    IF months_ahead < 0 OR months_ahead > 24 THEN
        RAISE EXCEPTION 'months_ahead must be 0..24';
    END IF;
    FOR i IN 0..months_ahead LOOP
        made := made + readings_add_partition(now() + make_interval(months => i));
    END LOOP;
    ALTER TABLE readings_default NO FORCE ROW LEVEL SECURITY;
    months := ARRAY(SELECT DISTINCT date_trunc('month', ts, 'UTC') FROM readings_default);
    ALTER TABLE readings_default FORCE ROW LEVEL SECURITY;
    FOREACH month IN ARRAY months LOOP
        made := made + readings_add_partition(month);
    END LOOP;
    RETURN made;
END
$$;

-- Drops every monthly partition that ends at or before `cutoff`, and deletes the default
-- partition's rows older than it; answers how many partitions went.
CREATE FUNCTION readings_drop_partitions_before(cutoff timestamptz) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    part record;
    dropped integer := 0;
BEGIN
    FOR part IN
        SELECT c.relname,
               (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]
                   AS upper_bound
        FROM pg_inherits AS i
        JOIN pg_class AS c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'readings'::regclass AND c.relname <> 'readings_default'
    LOOP
        IF part.upper_bound::timestamptz <= cutoff THEN
            EXECUTE format('DROP TABLE %I', part.relname);
            dropped := dropped + 1;
        END IF;
    END LOOP;
    ALTER TABLE readings_default NO FORCE ROW LEVEL SECURITY;
    DELETE FROM readings_default WHERE ts < cutoff;
    ALTER TABLE readings_default FORCE ROW LEVEL SECURITY;
    RETURN dropped;
END
$$;

REVOKE ALL ON FUNCTION readings_add_partition(timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION readings_ensure_partitions(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION readings_drop_partitions_before(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION readings_ensure_partitions(integer) TO farm_sync;
GRANT EXECUTE ON FUNCTION readings_drop_partitions_before(timestamptz) TO farm_sync;

-- A partition for every month that holds readings, and for this month and the next three.
DO $$
DECLARE
    month timestamptz;
BEGIN
    FOR month IN
        SELECT DISTINCT date_trunc('month', ts, 'UTC') FROM readings_unpartitioned
    LOOP
        PERFORM readings_add_partition(month);
    END LOOP;
    PERFORM readings_ensure_partitions(3);
END
$$;

INSERT INTO readings (device_id, metric, ts, farm_id, agent_id, value, unit, received_at)
SELECT device_id, metric, ts, farm_id, agent_id, value, unit, received_at
FROM readings_unpartitioned;

-- 2. Rollups of everything received, filled from what is there now.
CREATE TABLE reading_rollups (
    device_id uuid NOT NULL,
    metric text NOT NULL,
    resolution text NOT NULL CHECK (resolution IN ('1m', '1h')),
    bucket timestamptz NOT NULL,
    farm_id uuid NOT NULL,
    min double precision NOT NULL,
    max double precision NOT NULL,
    total double precision NOT NULL,
    count bigint NOT NULL CHECK (count > 0),
    unit text NOT NULL DEFAULT '',
    PRIMARY KEY (device_id, metric, resolution, bucket, farm_id),
    FOREIGN KEY (device_id, farm_id) REFERENCES devices (id, farm_id) ON DELETE CASCADE,
    CHECK (min <= max)
);

ALTER TABLE rollups NO FORCE ROW LEVEL SECURITY;
-- Minutes: raw readings plus the agent's 1-minute rollups (disjoint: each reading came once).
INSERT INTO reading_rollups (device_id, metric, resolution, bucket, farm_id, min, max, total,
                             count, unit)
SELECT device_id, metric, '1m', bucket, farm_id, min(vmin), max(vmax), sum(total), sum(n),
       max(unit)
FROM (
    SELECT device_id, metric, date_bin('1 minute', ts, TIMESTAMPTZ '2000-01-01 00:00:00+00')
               AS bucket, farm_id, value AS vmin, value AS vmax, value AS total, 1 AS n, unit
    FROM readings_unpartitioned
    UNION ALL
    SELECT device_id, metric, bucket, farm_id, min, max, mean * count, count, unit
    FROM rollups WHERE resolution = '1m'
) AS parts
GROUP BY device_id, metric, bucket, farm_id;
-- Hours: the minutes plus the agent's 1-hour rollups.
INSERT INTO reading_rollups (device_id, metric, resolution, bucket, farm_id, min, max, total,
                             count, unit)
SELECT device_id, metric, '1h', bucket, farm_id, min(vmin), max(vmax), sum(total), sum(n),
       max(unit)
FROM (
    SELECT device_id, metric, date_bin('1 hour', bucket, TIMESTAMPTZ '2000-01-01 00:00:00+00')
               AS bucket, farm_id, min AS vmin, max AS vmax, total, count AS n, unit
    FROM reading_rollups WHERE resolution = '1m'
    UNION ALL
    SELECT device_id, metric, bucket, farm_id, min, max, mean * count, count, unit
    FROM rollups WHERE resolution = '1h'
) AS parts
GROUP BY device_id, metric, bucket, farm_id;
ALTER TABLE rollups FORCE ROW LEVEL SECURITY;

DROP TABLE readings_unpartitioned;

-- Kept from now on by triggers, once per statement over the rows it changed.
CREATE FUNCTION reading_rollups_of_readings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO reading_rollups AS t (device_id, metric, resolution, bucket, farm_id, min, max,
                                      total, count, unit)
    SELECT i.device_id, i.metric, w.resolution,
           date_bin(w.width, i.ts, TIMESTAMPTZ '2000-01-01 00:00:00+00'), i.farm_id,
           min(i.value), max(i.value), sum(i.value), count(*), max(i.unit)
    FROM inserted AS i
    CROSS JOIN (VALUES ('1m', interval '1 minute'), ('1h', interval '1 hour')) AS w (resolution, width)
    GROUP BY 1, 2, 3, 4, 5
    ON CONFLICT (device_id, metric, resolution, bucket, farm_id) DO UPDATE SET
        min = least(t.min, excluded.min), max = greatest(t.max, excluded.max),
        total = t.total + excluded.total, count = t.count + excluded.count,
        unit = excluded.unit;
    RETURN NULL;
END
$$;
CREATE TRIGGER readings_roll_up AFTER INSERT ON readings
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT
    EXECUTE FUNCTION reading_rollups_of_readings();

-- The agent's rollups (`rollups`, merged by upsert): what a statement added to each of them.
CREATE FUNCTION reading_rollups_add(changes jsonb) RETURNS void LANGUAGE sql AS $$
    INSERT INTO reading_rollups AS t (device_id, metric, resolution, bucket, farm_id, min, max,
                                      total, count, unit)
    SELECT c.device_id, c.metric, w.resolution,
           date_bin(w.width, c.bucket, TIMESTAMPTZ '2000-01-01 00:00:00+00'), c.farm_id,
           min(c.min), max(c.max), sum(c.total), sum(c.count), max(c.unit)
    FROM jsonb_to_recordset(changes) AS c (device_id uuid, metric text, resolution text,
        bucket timestamptz, farm_id uuid, min float8, max float8, total float8, count bigint,
        unit text)
    JOIN (VALUES ('1m', interval '1 minute'), ('1h', interval '1 hour')) AS w (resolution, width)
        ON w.resolution = '1h' OR c.resolution = '1m'
    WHERE c.count > 0
    GROUP BY 1, 2, 3, 4, 5
    ON CONFLICT (device_id, metric, resolution, bucket, farm_id) DO UPDATE SET
        min = least(t.min, excluded.min), max = greatest(t.max, excluded.max),
        total = t.total + excluded.total, count = t.count + excluded.count,
        unit = excluded.unit;
$$;
CREATE FUNCTION reading_rollups_of_new_rollups() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM reading_rollups_add(coalesce(jsonb_agg(jsonb_build_object(
        'device_id', n.device_id, 'metric', n.metric, 'resolution', n.resolution,
        'bucket', n.bucket, 'farm_id', n.farm_id, 'min', n.min, 'max', n.max,
        'total', n.mean * n.count, 'count', n.count, 'unit', n.unit)), '[]'))
    FROM inserted AS n;
    RETURN NULL;
END
$$;
CREATE FUNCTION reading_rollups_of_merged_rollups() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM reading_rollups_add(coalesce(jsonb_agg(jsonb_build_object(
        'device_id', n.device_id, 'metric', n.metric, 'resolution', n.resolution,
        'bucket', n.bucket, 'farm_id', n.farm_id, 'min', n.min, 'max', n.max,
        'total', n.mean * n.count - o.mean * o.count, 'count', n.count - o.count,
        'unit', n.unit)), '[]'))
    FROM merged AS n
    JOIN before AS o USING (device_id, metric, resolution, bucket);
    RETURN NULL;
END
$$;
CREATE TRIGGER rollups_roll_up_inserted AFTER INSERT ON rollups
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT
    EXECUTE FUNCTION reading_rollups_of_new_rollups();
CREATE TRIGGER rollups_roll_up_merged AFTER UPDATE ON rollups
    REFERENCING OLD TABLE AS before NEW TABLE AS merged FOR EACH STATEMENT
    EXECUTE FUNCTION reading_rollups_of_merged_rollups();

-- 3. Row-level security as on every table below a farm (0005_row_level_security.sql).
DO $$
DECLARE
    table_name text;
    can_read constant text := '(SELECT authz.is_admin())'
        ' OR farm_id = ANY ((SELECT authz.readable_farm_ids())::uuid[])';
    can_write constant text := '(SELECT authz.is_admin())'
        ' OR farm_id = ANY ((SELECT authz.writable_farm_ids())::uuid[])';
BEGIN
    FOREACH table_name IN ARRAY ARRAY['readings', 'readings_default', 'reading_rollups'] LOOP
        EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', table_name);
        EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', table_name);
    END LOOP;
    FOREACH table_name IN ARRAY ARRAY['readings', 'reading_rollups'] LOOP
        EXECUTE format(
            'GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO farm_sync', table_name
        );
        EXECUTE format(
            'CREATE POLICY system_all ON public.%I FOR ALL TO farm_sync'
            ' USING (true) WITH CHECK (true)',
            table_name
        );
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO farm_app', table_name);
        EXECUTE format(
            'CREATE POLICY member_select ON public.%I FOR SELECT TO farm_app USING (%s)',
            table_name, can_read
        );
        EXECUTE format(
            'CREATE POLICY member_insert ON public.%I FOR INSERT TO farm_app WITH CHECK (%s)',
            table_name, can_write
        );
        EXECUTE format(
            'CREATE POLICY member_update ON public.%I FOR UPDATE TO farm_app'
            ' USING (%s) WITH CHECK (%s)',
            table_name, can_write, can_write
        );
        EXECUTE format(
            'CREATE POLICY member_delete ON public.%I FOR DELETE TO farm_app USING (%s)',
            table_name, can_write
        );
    END LOOP;
END
$$;
