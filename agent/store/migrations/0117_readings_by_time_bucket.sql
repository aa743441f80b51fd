-- Raw readings and their rollups keyed by a 30-minute time bucket first (ADR 0079).
--
-- Clustered on (series_id, ts), every fold inserted a few rows inside each series' range of
-- history: 1,500 series, 1,500 places in the B-tree, each page split there left half full and
-- written whole to the WAL and again at the checkpoint. About 220 bytes were written per
-- reading per fold, against some 60 for appending the same rows, and the SD card wears by the
-- bytes written. Keyed (bucket, series_id, ts), with bucket = ts / 1800000, a fold of a bucket
-- that has ended appends its rows at the end of the tree. The hourly rollups too: an hour's
-- rows sit in the bucket of its start, so the second fold of an hour rewrites the few pages of
-- that bucket instead of the last page of every series (a page per series per fold, once each
-- series has a page of its own: 26 B of the 130 written per reading after a day of folds).
--
-- An existing farm's readings are not copied: 30 days of raw readings can be 10 GB on a card
-- that is nearly full, and a copy needs that much free space and hours. The series-ordered
-- tables are renamed (`readings_by_series`, `readings_1m_by_series`, `readings_1h_by_series`),
-- kept as they are and written no more; reads take them alongside the new tables and
-- retention empties them in time (the hourly rollups, kept forever by default, stay there).
--
-- Beside the new tables, small ones let a read or a delete seek instead of scanning:
-- `readings_buckets`, `readings_1m_buckets` and `readings_1h_buckets` list the buckets that
-- hold rows (a query of a series walks them, one seek each); `readings_latest` is each
-- series' newest raw reading (a series that stopped a month ago is not searched for through a
-- month of buckets). The trigger that keeps the rollups keeps them too.
--
-- The new tables have no foreign key to `series`: its cascade would look for a series' rows
-- without a bucket, a scan of the whole table per series. A trigger deletes them, seeking
-- bucket by bucket.
--
-- The fold folds whole buckets: `readings_fold.until_ts` is the bucket boundary of the fold
-- under way; readings staged at or after it (the bucket still under way) stay staged.

DROP VIEW readings_all;
DROP VIEW readings_1m_all;
DROP VIEW readings_1h_all;
DROP VIEW readings_staged;
DROP TRIGGER readings_rollup;
DROP TRIGGER outbox_readings;

ALTER TABLE readings RENAME TO readings_by_series;
ALTER TABLE readings_1m RENAME TO readings_1m_by_series;
ALTER TABLE readings_1h RENAME TO readings_1h_by_series;

CREATE TABLE readings (
    bucket      INTEGER NOT NULL,
    series_id   INTEGER NOT NULL,
    ts          INTEGER NOT NULL,
    value       REAL NOT NULL,
    raw         REAL,
    received_ts INTEGER,
    device_ts   INTEGER,
    PRIMARY KEY (bucket, series_id, ts)
) WITHOUT ROWID;

-- A re-delivery of a reading stamped on receipt is found by its device time (0015).
CREATE INDEX readings_redelivery ON readings (series_id, device_ts) WHERE device_ts IS NOT NULL;

CREATE TABLE readings_1m (
    bucket    INTEGER NOT NULL,
    series_id INTEGER NOT NULL,
    ts        INTEGER NOT NULL,
    vmin      REAL NOT NULL,
    vmax      REAL NOT NULL,
    vsum      REAL NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (bucket, series_id, ts)
) WITHOUT ROWID;

-- An hour's row is in the bucket of the hour's start.
CREATE TABLE readings_1h (
    bucket    INTEGER NOT NULL,
    series_id INTEGER NOT NULL,
    ts        INTEGER NOT NULL,
    vmin      REAL NOT NULL,
    vmax      REAL NOT NULL,
    vsum      REAL NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (bucket, series_id, ts)
) WITHOUT ROWID;

CREATE TABLE readings_buckets (bucket INTEGER PRIMARY KEY);
CREATE TABLE readings_1m_buckets (bucket INTEGER PRIMARY KEY);
CREATE TABLE readings_1h_buckets (bucket INTEGER PRIMARY KEY);

CREATE TABLE readings_latest (
    series_id INTEGER PRIMARY KEY REFERENCES series(id) ON DELETE CASCADE,
    ts        INTEGER NOT NULL,
    value     REAL NOT NULL
);

INSERT INTO readings_latest (series_id, ts, value)
SELECT s.id, r.ts, r.value FROM series AS s
JOIN readings_by_series AS r ON r.series_id = s.id
    AND r.ts = (SELECT max(ts) FROM readings_by_series WHERE series_id = s.id);

CREATE TRIGGER readings_rollup AFTER INSERT ON readings
BEGIN
    INSERT OR IGNORE INTO readings_buckets (bucket) VALUES (NEW.bucket);
    INSERT OR IGNORE INTO readings_1m_buckets (bucket) VALUES (NEW.bucket);
    INSERT OR IGNORE INTO readings_1h_buckets (bucket)
    VALUES ((NEW.ts - NEW.ts % 3600000) / 1800000);
    INSERT INTO readings_1m (bucket, series_id, ts, vmin, vmax, vsum, n)
    VALUES (NEW.bucket, NEW.series_id, NEW.ts - NEW.ts % 60000, NEW.value, NEW.value,
            NEW.value, 1)
    ON CONFLICT (bucket, series_id, ts) DO UPDATE SET
        vmin = min(vmin, excluded.vmin),
        vmax = max(vmax, excluded.vmax),
        vsum = vsum + excluded.vsum,
        n = n + 1;
    INSERT INTO readings_1h (bucket, series_id, ts, vmin, vmax, vsum, n)
    VALUES ((NEW.ts - NEW.ts % 3600000) / 1800000, NEW.series_id, NEW.ts - NEW.ts % 3600000,
            NEW.value, NEW.value, NEW.value, 1)
    ON CONFLICT (bucket, series_id, ts) DO UPDATE SET
        vmin = min(vmin, excluded.vmin),
        vmax = max(vmax, excluded.vmax),
        vsum = vsum + excluded.vsum,
        n = n + 1;
    INSERT INTO readings_latest (series_id, ts, value) VALUES (NEW.series_id, NEW.ts, NEW.value)
    ON CONFLICT (series_id) DO UPDATE SET ts = excluded.ts, value = excluded.value
    WHERE excluded.ts > readings_latest.ts;
END;

-- As in 0092: a reading written here directly (no stage) is queued for the cloud; one the fold
-- inserts was queued when it was staged.
CREATE TRIGGER outbox_readings AFTER INSERT ON readings
WHEN (SELECT upto FROM readings_fold WHERE id = 1) = 0
BEGIN
    UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'outbox';
    INSERT INTO outbox_readings (seq, series_id, ts, value)
    VALUES ((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), NEW.series_id, NEW.ts,
            NEW.value);
    INSERT INTO outbox_latest (series_id, seq)
    VALUES (NEW.series_id, (SELECT seq FROM sqlite_sequence WHERE name = 'outbox'))
    ON CONFLICT (series_id) DO UPDATE SET seq = excluded.seq;
END;

CREATE TRIGGER series_readings AFTER DELETE ON series
BEGIN
    DELETE FROM readings
    WHERE bucket IN (SELECT bucket FROM readings_buckets) AND series_id = OLD.id;
    DELETE FROM readings_1m
    WHERE bucket IN (SELECT bucket FROM readings_1m_buckets) AND series_id = OLD.id;
    DELETE FROM readings_1h
    WHERE bucket IN (SELECT bucket FROM readings_1h_buckets) AND series_id = OLD.id;
END;

-- A fold under way before the upgrade folds everything it took, as it did then.
ALTER TABLE readings_fold ADD COLUMN until_ts INTEGER NOT NULL DEFAULT 9223372036854775807;

CREATE VIEW readings_staged AS
SELECT s.series_id, s.ts, s.value, s.raw, s.received_ts, s.device_ts
FROM readings_stage AS s, readings_fold AS f
WHERE NOT (s.seq <= f.upto AND s.series_id < f.next_series AND s.ts < f.until_ts);

-- Every reading once, whichever table holds it. A read of one series in a range names the
-- tables itself (agent/store/readings.py), with the buckets to seek.
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
