-- A compact, bounded outbox for long outages (docs/design.md, section 8).
--
-- Queued readings no longer repeat themselves as JSON text in `outbox` (about 150 bytes each on
-- disk): each is one narrow row of `outbox_readings` (about 30 bytes), written by the trigger
-- below in the transaction of the reading. Rollups that replace readings when the outbox is over
-- its cap live in `outbox_rollups`, one row per series, width and bucket while unsent (the
-- partial unique index), so compaction merges into it instead of adding a second row.
--
-- One sequence numbers every queued change: `outbox`'s AUTOINCREMENT counter, kept by SQLite in
-- sqlite_sequence; the readings trigger takes the next number from it by hand (SQLite documents
-- that row as ordinary data). A rollup takes the lowest number of what it replaces, so the
-- cloud's contiguous acknowledgement never passes a number whose content is still queued.

DROP TRIGGER outbox_readings;

INSERT INTO sqlite_sequence (name, seq)
SELECT 'outbox', coalesce((SELECT max(seq) FROM outbox), 0)
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'outbox');

CREATE TABLE outbox_readings (
    seq       INTEGER PRIMARY KEY,
    series_id INTEGER NOT NULL,
    ts        INTEGER NOT NULL,
    value     REAL NOT NULL
);

-- width_ms: 60000 (1-minute) or 3600000 (1-hour); ts is the bucket start. inflight = 1 once a
-- batch holding the row was posted and its answer not yet seen: such a row is sent again
-- unchanged, never merged into (the cloud may already hold it).
CREATE TABLE outbox_rollups (
    seq       INTEGER PRIMARY KEY,
    series_id INTEGER NOT NULL,
    width_ms  INTEGER NOT NULL CHECK (width_ms IN (60000, 3600000)),
    ts        INTEGER NOT NULL,
    vmin      REAL NOT NULL,
    vmax      REAL NOT NULL,
    vsum      REAL NOT NULL,
    n         INTEGER NOT NULL CHECK (n > 0),
    inflight  INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX outbox_rollups_open ON outbox_rollups (series_id, width_ms, ts)
    WHERE inflight = 0;

-- Sequence ranges (lo, hi] of `outbox_readings` posted in a batch whose answer was not seen:
-- sent again unchanged, never compacted.
CREATE TABLE outbox_inflight (
    lo INTEGER NOT NULL,
    hi INTEGER NOT NULL,
    PRIMARY KEY (lo, hi)
) WITHOUT ROWID;

-- The newest queued reading of each series: after an outage the state goes before the backfill.
CREATE TABLE outbox_latest (
    series_id INTEGER PRIMARY KEY,
    seq       INTEGER NOT NULL
);

-- A queued reading's share of the outbox's byte figure (its row in outbox_readings) is the
-- constant 32; a rollup's is 64 (agent/sync/outbox.py READING_BYTES, ROLLUP_BYTES).
CREATE TRIGGER outbox_readings AFTER INSERT ON readings
BEGIN
    UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'outbox';
    INSERT INTO outbox_readings (seq, series_id, ts, value)
    VALUES ((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), NEW.series_id, NEW.ts,
            NEW.value);
    INSERT INTO outbox_latest (series_id, seq)
    VALUES (NEW.series_id, (SELECT seq FROM sqlite_sequence WHERE name = 'outbox'))
    ON CONFLICT (series_id) DO UPDATE SET seq = excluded.seq;
    UPDATE outbox_stats SET records = records + 1, bytes = bytes + 32 WHERE id = 1;
END;

-- What the old outbox queued moves over; rows already acknowledged (sent = 1) are the cloud's.
INSERT INTO outbox_readings (seq, series_id, ts, value)
SELECT seq, json_extract(payload, '$.s'), json_extract(payload, '$.t'),
       json_extract(payload, '$.v')
FROM outbox WHERE kind = 'reading' AND sent = 0;
INSERT INTO outbox_rollups (seq, series_id, width_ms, ts, vmin, vmax, vsum, n)
SELECT min(seq), json_extract(payload, '$.s'), 60000, json_extract(payload, '$.t'),
       min(json_extract(payload, '$.min')), max(json_extract(payload, '$.max')),
       sum(json_extract(payload, '$.sum')), sum(json_extract(payload, '$.n'))
FROM outbox WHERE kind = 'rollup_1m' AND sent = 0
GROUP BY json_extract(payload, '$.s'), json_extract(payload, '$.t');
DELETE FROM outbox WHERE kind IN ('reading', 'rollup_1m') OR sent = 1;
UPDATE outbox_stats SET
    records = (SELECT count(*) FROM outbox) + (SELECT count(*) FROM outbox_readings)
              + (SELECT count(*) FROM outbox_rollups),
    bytes = (SELECT coalesce(sum(bytes), 0) FROM outbox)
            + 32 * (SELECT count(*) FROM outbox_readings)
            + 64 * (SELECT count(*) FROM outbox_rollups)
WHERE id = 1;
