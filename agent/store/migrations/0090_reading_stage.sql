-- An append-only stage for readings (issue 25): on an SD card, bytes written are what wears it.
--
-- A reading is committed (and acknowledged) once it is in `readings_stage`, appended in arrival
-- order: a commit rewrites the stage's last page or two, not a page of every series it touches.
-- The fold (agent/store/readings.py) moves staged readings into the series-ordered `readings`
-- in large batches, series by series; the triggers of `readings` keep the rollups and the sync
-- outbox then, once per fold instead of once per commit.
--
-- `readings_fold` is the fold under way: staged rows with seq <= upto whose series id is below
-- next_series are already in `readings` (they are deleted when the fold ends). Both 0: no fold.
-- The views show every reading exactly once, folded or not; every read of readings uses them.

CREATE TABLE readings_stage (
    seq         INTEGER PRIMARY KEY,
    series_id   INTEGER NOT NULL,
    ts          INTEGER NOT NULL,
    value       REAL NOT NULL,
    raw         REAL,
    received_ts INTEGER,
    device_ts   INTEGER
);

CREATE TABLE readings_fold (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    upto        INTEGER NOT NULL DEFAULT 0,
    next_series INTEGER NOT NULL DEFAULT 0
);
INSERT INTO readings_fold (id) VALUES (1);

-- A deleted series takes its staged readings with it (its id may be given out again).
CREATE TRIGGER series_unstage AFTER DELETE ON series
BEGIN
    DELETE FROM readings_stage WHERE series_id = OLD.id;
END;

CREATE VIEW readings_staged AS
SELECT s.series_id, s.ts, s.value, s.raw, s.received_ts, s.device_ts
FROM readings_stage AS s, readings_fold AS f
WHERE NOT (s.seq <= f.upto AND s.series_id < f.next_series);

CREATE VIEW readings_all AS
SELECT series_id, ts, value, raw, received_ts, device_ts FROM readings
UNION ALL
SELECT series_id, ts, value, raw, received_ts, device_ts FROM readings_staged;

-- A staged reading is a rollup row of its own (n = 1); readers sum rows of the same bucket.
CREATE VIEW readings_1m_all AS
SELECT series_id, ts, vmin, vmax, vsum, n FROM readings_1m
UNION ALL
SELECT series_id, ts - ts % 60000, value, value, value, 1 FROM readings_staged;

CREATE VIEW readings_1h_all AS
SELECT series_id, ts, vmin, vmax, vsum, n FROM readings_1h
UNION ALL
SELECT series_id, ts - ts % 3600000, value, value, value, 1 FROM readings_staged;
