-- A reading commit no longer rewrites the outbox's counter and totals (agent/store/outbox_sequence.py).
--
-- At a farm's trickle each commit of a few dozen readings wrote about six 4 KiB pages, two of
-- them the same two counters: `sqlite_sequence` (the outbox's shared sequence, bumped per
-- staged reading by `outbox_staged`) and `outbox_stats` (records and bytes queued). The
-- staged batch now writes its readings' outbox copies itself, numbered from the sequence as
-- the agent holds it in memory; the stored counter is raised before any other write.
--
-- `counted_upto`: the queued readings up to this number are in `records` and `bytes`; those
-- above it are counted when the totals are read, and added to them by the next write of the
-- outbox that changes them (an acknowledgement, a compaction).

DROP TRIGGER outbox_staged;

ALTER TABLE outbox_stats ADD COLUMN counted_upto INTEGER NOT NULL DEFAULT 0;
UPDATE outbox_stats SET counted_upto = coalesce((SELECT max(seq) FROM outbox_readings), 0)
WHERE id = 1;

-- A reading written into `readings` directly (no stage) is queued as before, and counted as
-- the staged ones are.
DROP TRIGGER outbox_readings;

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
