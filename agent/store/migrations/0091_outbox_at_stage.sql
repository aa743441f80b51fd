-- Staged readings are queued for the cloud when they are committed, not when they are folded.
--
-- The fold runs every 30 minutes or so (0090): queuing a reading's sync copy there held every
-- reading back from the cloud (its dashboard, streams and climate history) for that long. The
-- copy is a row appended to `outbox_readings` (ordered by its sequence number, so a commit
-- rewrites its last page, as it does the stage's), written in the transaction that stages the
-- reading. `outbox_latest` (one row per series: after an outage the newest reading of each
-- series goes first) would cost a page of its own per commit; the fold brings it up to date
-- instead (agent/store/readings.py), and the uploader folds before it takes the latest state.
--
-- A reading inserted into `readings` by the fold (readings_fold.upto > 0) was queued when it
-- was staged; one written there directly (no stage) is queued by the trigger as before.

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
    UPDATE outbox_stats SET records = records + 1, bytes = bytes + 32 WHERE id = 1;
END;

CREATE TRIGGER outbox_staged AFTER INSERT ON readings_stage
BEGIN
    UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'outbox';
    INSERT INTO outbox_readings (seq, series_id, ts, value)
    VALUES ((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), NEW.series_id, NEW.ts,
            NEW.value);
    UPDATE outbox_stats SET records = records + 1, bytes = bytes + 32 WHERE id = 1;
END;
