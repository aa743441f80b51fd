-- Readings (docs/design.md, section 6): raw values plus 1-minute and 1-hour rollups.
-- Sized for an SD card: integer series ids instead of repeating (device, metric) text, integer
-- unix-millisecond timestamps, and WITHOUT ROWID tables clustered on (series_id, ts) so a range
-- query is one contiguous b-tree walk and no separate index is stored.

CREATE TABLE series (
    id         INTEGER PRIMARY KEY,
    device_id  TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
    metric     TEXT NOT NULL,
    unit       TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    UNIQUE (device_id, metric)
);

-- value is calibrated; raw is the uncalibrated value, NULL when calibration left it unchanged;
-- received_ts is the agent's receive time, NULL unless it differs from ts by more than the skew.
-- The first write of a (series, ts) wins: a re-delivered message is a no-op.
CREATE TABLE readings (
    series_id   INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    ts          INTEGER NOT NULL,
    value       REAL NOT NULL,
    raw         REAL,
    received_ts INTEGER,
    PRIMARY KEY (series_id, ts)
) WITHOUT ROWID;

-- Rollups keep sum and count, not mean, so late readings merge exactly; ts is the bucket start.
CREATE TABLE readings_1m (
    series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    ts        INTEGER NOT NULL,
    vmin      REAL NOT NULL,
    vmax      REAL NOT NULL,
    vsum      REAL NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (series_id, ts)
) WITHOUT ROWID;

CREATE TABLE readings_1h (
    series_id INTEGER NOT NULL REFERENCES series(id) ON DELETE CASCADE,
    ts        INTEGER NOT NULL,
    vmin      REAL NOT NULL,
    vmax      REAL NOT NULL,
    vsum      REAL NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (series_id, ts)
) WITHOUT ROWID;

-- Rollups follow every raw row that is actually inserted, in the same transaction, whichever
-- code path inserts it; an ignored duplicate fires nothing. Pruning raw rows leaves rollups alone.
CREATE TRIGGER readings_rollup AFTER INSERT ON readings
BEGIN
    INSERT INTO readings_1m (series_id, ts, vmin, vmax, vsum, n)
    VALUES (NEW.series_id, NEW.ts - NEW.ts % 60000, NEW.value, NEW.value, NEW.value, 1)
    ON CONFLICT (series_id, ts) DO UPDATE SET
        vmin = min(vmin, excluded.vmin),
        vmax = max(vmax, excluded.vmax),
        vsum = vsum + excluded.vsum,
        n = n + 1;
    INSERT INTO readings_1h (series_id, ts, vmin, vmax, vsum, n)
    VALUES (NEW.series_id, NEW.ts - NEW.ts % 3600000, NEW.value, NEW.value, NEW.value, 1)
    ON CONFLICT (series_id, ts) DO UPDATE SET
        vmin = min(vmin, excluded.vmin),
        vmax = max(vmax, excluded.vmax),
        vsum = vsum + excluded.vsum,
        n = n + 1;
END;
