-- A sensor's series over a range in one statement (GET /api/v1/sensors/{id}/data).
--
-- The read used to be eight round trips (BEGIN, set_config, the sensor, its farm's grant, the
-- raw count, the points, the unit, COMMIT). While a fleet uploads, the process's event loop
-- is busy with batches and every round trip waits for it again: measured, the trivial ones
-- took 40 to 450 ms each, and the year read 430 ms at the median. This function does the
-- database's part in one call, outside any explicit transaction.
--
-- It runs as its caller (SECURITY INVOKER: farm_app) and names the user it acts for the way
-- Database.as_user does, set_config('app.user_id', ..., true), which ends with the statement's
-- transaction; every row it reads passes the tables' row-level security policies. farm_app
-- may set that setting itself anyway, so the function grants nothing it did not have.
--
-- The service decides everything that needs no data (validation, bucket alignment, whether
-- raw readings are kept, whether minutes fit the budget) and passes it; this decides whether
-- raw readings fit the budget and renders the points (see cloud/store/readings.py).
--
-- Rows: none when the sensor is not visible; otherwise one per metric in name order (one with
-- a NULL metric when the sensor has no data), each with the sensor's farm, whether the caller
-- may write it (NULL when the farm is not visible), the resolution, the unit and the points
-- as a JSON array.
CREATE FUNCTION sensor_series(
    caller uuid,
    sensor uuid,
    wanted text,              -- one metric, or NULL for every metric of the sensor
    range_start timestamptz,
    range_end timestamptz,
    budget integer,
    raw_kept boolean,         -- raw readings are kept from range_start on
    minutes_fit boolean,      -- the range's minutes fit the budget
    minute_start timestamptz, -- range_start rounded down to a minute
    hour_start timestamptz    -- and to an hour
) RETURNS TABLE (
    farm_id uuid, writable boolean, resolution text, metric text, unit text, points text
)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path = public, pg_temp AS $$
DECLARE
    farm uuid;
    can_write boolean;
    metrics text[];
    chosen text;
    m text;
BEGIN
    PERFORM set_config('app.user_id', caller::text, true);
    SELECT d.farm_id INTO farm FROM devices AS d WHERE d.id = sensor AND d.kind = 'sensor';
    IF farm IS NULL THEN
        RETURN;
    END IF;
    SELECT f.id = ANY ((SELECT authz.writable_farm_ids())::uuid[]) OR (SELECT authz.is_admin())
    INTO can_write FROM farms AS f WHERE f.id = farm;

    IF wanted IS NOT NULL THEN
        metrics := ARRAY[wanted];
    ELSE
        -- A loose index scan (one probe per distinct metric) over reading_rollups' key, which
        -- holds every metric received, instead of reading every row of the device.
        metrics := ARRAY(
            WITH RECURSIVE found (name) AS (
                (SELECT r.metric FROM reading_rollups AS r WHERE r.device_id = sensor
                 ORDER BY r.metric LIMIT 1)
                UNION ALL
                SELECT (SELECT r.metric FROM reading_rollups AS r
                        WHERE r.device_id = sensor AND r.metric > found.name
                        ORDER BY r.metric LIMIT 1)
                FROM found WHERE found.name IS NOT NULL
            )
            SELECT found.name FROM found WHERE found.name IS NOT NULL ORDER BY found.name
        );
    END IF;

    -- Raw when every metric's raw readings plus stored 1-minute rollups fit the budget
    -- (counted to at most budget + 1 each), else minutes when they fit, else hours.
    chosen := CASE WHEN minutes_fit THEN '1m' ELSE '1h' END;
    IF raw_kept THEN
        chosen := 'raw';
        FOREACH m IN ARRAY metrics LOOP
            IF (SELECT count(*) FROM (SELECT 1 FROM readings AS r
                    WHERE r.device_id = sensor AND r.metric = m AND r.ts >= range_start
                      AND r.ts < range_end LIMIT budget + 1) AS c)
             + (SELECT count(*) FROM (SELECT 1 FROM rollups AS o
                    WHERE o.device_id = sensor AND o.metric = m AND o.resolution = '1m'
                      AND o.bucket >= range_start AND o.bucket < range_end LIMIT budget + 1) AS c)
               > budget THEN
                chosen := CASE WHEN minutes_fit THEN '1m' ELSE '1h' END;
                EXIT;
            END IF;
        END LOOP;
    END IF;

    IF cardinality(metrics) = 0 THEN
        RETURN QUERY SELECT farm, can_write, chosen, NULL::text, NULL::text, NULL::text;
        RETURN;
    END IF;
    FOREACH m IN ARRAY metrics LOOP
        farm_id := farm;
        writable := can_write;
        resolution := chosen;
        metric := m;
        -- The unit of the metric's newest reading or rollup ('' when there is none).
        unit := coalesce(
            (SELECT r.unit FROM readings AS r WHERE r.device_id = sensor AND r.metric = m
             ORDER BY r.ts DESC LIMIT 1),
            (SELECT o.unit FROM rollups AS o WHERE o.device_id = sensor AND o.metric = m
             ORDER BY o.bucket DESC LIMIT 1),
            (SELECT h.unit FROM reading_rollups AS h WHERE h.device_id = sensor
             AND h.metric = m AND h.resolution = '1h' ORDER BY h.bucket DESC LIMIT 1),
            '');
        -- Points as the API writes them (ReadingPoint, timestamps as in docs/design.md, section 3),
        -- oldest first, one JSON array: text concatenation renders them in half the time
        -- json_build_object takes; a float8 as text is its shortest exact form
        -- (extra_float_digits > 0, the default), as in JSON, and the values are finite
        -- (readings arrive as scaled integers, protocol/sync.py). Each resolution is its own
        -- statement so that the hours' is planned on their covering index (0097), partial
        -- on resolution = '1h'.
        IF chosen = 'raw' THEN
            -- Raw readings, and the stored 1-minute rollups that stand for the readings not
            -- sent raw.
            SELECT '[' || coalesce(string_agg(
                       '{"timestamp":"'
                       || to_char(p.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                       || '","value":' || p.value || ',"min":' || p.min || ',"max":' || p.max
                       || ',"count":' || p.count || '}', ',' ORDER BY p.at), '') || ']'
            INTO points
            FROM (
                SELECT r.ts AS at, r.value, r.value AS min, r.value AS max, 1::bigint AS count
                FROM readings AS r WHERE r.device_id = sensor AND r.metric = m
                  AND r.ts >= range_start AND r.ts < range_end
                UNION ALL
                SELECT o.bucket, o.mean, o.min, o.max, o.count::bigint FROM rollups AS o
                WHERE o.device_id = sensor AND o.metric = m AND o.resolution = '1m'
                  AND o.bucket >= range_start AND o.bucket < range_end
            ) AS p;
        ELSIF chosen = '1m' THEN
            SELECT '[' || coalesce(string_agg(
                       '{"timestamp":"'
                       || to_char(p.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                       || '","value":' || p.value || ',"min":' || p.min || ',"max":' || p.max
                       || ',"count":' || p.count || '}', ',' ORDER BY p.at), '') || ']'
            INTO points
            FROM (
                SELECT b.bucket AS at, b.total / b.count AS value, b.min, b.max, b.count
                FROM reading_rollups AS b
                WHERE b.device_id = sensor AND b.metric = m AND b.resolution = '1m'
                  AND b.bucket >= minute_start AND b.bucket < range_end
            ) AS p;
        ELSE
            SELECT '[' || coalesce(string_agg(
                       '{"timestamp":"'
                       || to_char(p.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
                       || '","value":' || p.value || ',"min":' || p.min || ',"max":' || p.max
                       || ',"count":' || p.count || '}', ',' ORDER BY p.at), '') || ']'
            INTO points
            FROM (
                SELECT b.bucket AS at, b.total / b.count AS value, b.min, b.max, b.count
                FROM reading_rollups AS b
                WHERE b.device_id = sensor AND b.metric = m AND b.resolution = '1h'
                  AND b.bucket >= hour_start AND b.bucket < range_end
            ) AS p;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION sensor_series(uuid, uuid, text, timestamptz, timestamptz, integer,
    boolean, boolean, timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sensor_series(uuid, uuid, text, timestamptz, timestamptz, integer,
    boolean, boolean, timestamptz, timestamptz) TO farm_app;
