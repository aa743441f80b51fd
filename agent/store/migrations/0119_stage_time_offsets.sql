-- A staged reading's time is kept as an offset from the stage's base time (docs/adr/0086).
--
-- On an SD card the stage is what a farm's trickle writes most: each reading's row is written
-- to the WAL and again at the checkpoint. A time of unix milliseconds takes 6 bytes of a row of
-- about 29. Kept as an offset from `readings_fold.stage_base`, which the fold sets to the start
-- of the bucket under way when it empties the stage, a reading stamped within two hours of it
-- takes 3 bytes. A reading far from it (a device's backlog, a clock far off) takes what its
-- offset needs, and is as exact.
--
-- The rows are in `readings_stage_rows`; `readings_stage` is now a view of them with their
-- times, so every reader of the stage reads it as before. A write goes to the table, its times
-- less the base; the fold re-bases the rows it keeps when it moves the base.

ALTER TABLE readings_fold ADD COLUMN stage_base INTEGER NOT NULL DEFAULT 0;
UPDATE readings_fold SET stage_base = (CAST(strftime('%s', 'now') AS INTEGER) / 1800) * 1800000
WHERE id = 1;

CREATE TABLE readings_stage_rows (
    seq         INTEGER PRIMARY KEY,
    series_id   INTEGER NOT NULL,
    dts         INTEGER NOT NULL,
    value       REAL NOT NULL,
    raw         REAL,
    received_ts INTEGER,
    device_ts   INTEGER
);

INSERT INTO readings_stage_rows (seq, series_id, dts, value, raw, received_ts, device_ts)
SELECT seq, series_id, ts - (SELECT stage_base FROM readings_fold WHERE id = 1), value, raw,
       received_ts, device_ts
FROM readings_stage ORDER BY seq;

DROP VIEW outbox_staged;
DROP VIEW readings_all;
DROP VIEW readings_1m_all;
DROP VIEW readings_1h_all;
DROP VIEW readings_staged;
DROP TRIGGER series_unstage;
DROP TABLE readings_stage;

-- The base is read once per statement (a subquery that does not depend on the row), and the
-- view is a single table's: a read by `seq` seeks as it did on the table.
CREATE VIEW readings_stage AS
SELECT seq, series_id, dts + (SELECT stage_base FROM readings_fold WHERE id = 1) AS ts, value,
       raw, received_ts, device_ts
FROM readings_stage_rows;

CREATE TRIGGER series_unstage AFTER DELETE ON series
BEGIN
    DELETE FROM readings_stage_rows WHERE series_id = OLD.id;
END;

-- As in 0116 and 0117.
CREATE VIEW outbox_staged AS
SELECT seq, series_id, ts, value FROM readings_stage
WHERE seq > (SELECT staged_acked FROM outbox_stats WHERE id = 1);

CREATE VIEW readings_staged AS
SELECT s.series_id, s.dts + f.stage_base AS ts, s.value, s.raw, s.received_ts, s.device_ts
FROM readings_stage_rows AS s, readings_fold AS f
WHERE NOT (s.seq <= f.upto AND s.series_id < f.next_series AND s.dts + f.stage_base < f.until_ts);

CREATE VIEW readings_all AS
SELECT series_id, ts, value, raw, received_ts, device_ts FROM readings
UNION ALL
SELECT series_id, ts, value, raw, received_ts, device_ts FROM readings_by_series
UNION ALL
SELECT series_id, ts, value, raw, received_ts, device_ts FROM readings_staged;

CREATE VIEW readings_1m_all AS
SELECT series_id, ts, vmin, vmax, vsum, n FROM readings_1m
UNION ALL
SELECT series_id, ts, vmin, vmax, vsum, n FROM readings_1m_by_series
UNION ALL
SELECT series_id, ts - ts % 60000, value, value, value, 1 FROM readings_staged;

CREATE VIEW readings_1h_all AS
SELECT series_id, ts, vmin, vmax, vsum, n FROM readings_1h
UNION ALL
SELECT series_id, ts, vmin, vmax, vsum, n FROM readings_1h_by_series
UNION ALL
SELECT series_id, ts - ts % 3600000, value, value, value, 1 FROM readings_staged;
