-- A staged reading is queued for the cloud by being in the stage (docs/adr/0078).
--
-- Until now a reading commit appended each reading to `readings_stage` and a copy of it to
-- `outbox_readings` (0091, 0092), and the copy was deleted again, row by row, when the cloud
-- acknowledged it a few seconds later: on an SD card, at a farm's pace, the copy and the pages
-- it freed were a third of what a commit wrote. A staged row now takes its number from the
-- outbox's sequence (`readings_stage.seq` IS its outbox number), and the uploader takes the
-- staged readings the cloud has not acknowledged from the stage itself (agent/sync/outbox.py).
--
-- `outbox_stats.staged_acked`: every staged reading numbered at or below it is committed in
-- the cloud. The uploader takes staged readings in sequence order, so those acknowledged are
-- always the stage's lowest numbers; the acknowledgement raises it in the transaction that
-- notes the cloud's answer (a row it writes anyway), and no staged row is deleted. The fold
-- queues the staged readings above it in `outbox_readings`, where an outage's backlog is kept
-- and compacted, when it empties the stage.
--
-- The existing stage is numbered by its own rowids, and its readings' copies are queued
-- already: it is folded here, so the stage starts empty and every number in it from now on is
-- an outbox number. `readings_fold.upto` is set while it is folded, so the trigger of
-- `readings` does not queue a reading twice (its copy is in `outbox_readings`, or the cloud
-- holds it); INSERT OR IGNORE skips the readings of a fold cut short, already in `readings`.

ALTER TABLE outbox_stats ADD COLUMN staged_acked INTEGER NOT NULL DEFAULT 0;

UPDATE readings_fold SET upto = max(upto, 1) WHERE id = 1;

INSERT OR IGNORE INTO readings (series_id, ts, value, raw, received_ts, device_ts)
SELECT series_id, ts, value, raw, received_ts, device_ts FROM readings_stage
ORDER BY series_id, ts;

UPDATE devices SET
    last_reading = max(coalesce(last_reading, ''), s.stamp),
    last_seen = max(coalesce(last_seen, ''), s.stamp)
FROM (SELECT se.device_id AS device_id,
             strftime('%Y-%m-%dT%H:%M:%fZ', max(st.ts) / 1000.0, 'unixepoch') AS stamp
      FROM readings_stage AS st JOIN series AS se ON se.id = st.series_id
      GROUP BY se.device_id) AS s
WHERE devices.id = s.device_id;

DELETE FROM readings_stage;

UPDATE readings_fold SET upto = 0, next_series = 0 WHERE id = 1;

INSERT INTO outbox_latest (series_id, seq) SELECT series_id, seq FROM outbox_readings
WHERE seq > coalesce((SELECT max(seq) FROM outbox_latest), 0) ORDER BY seq
ON CONFLICT (series_id) DO UPDATE SET seq = excluded.seq;

-- The staged readings the cloud has not acknowledged: queued readings as those of
-- `outbox_readings` are (a range of the stage's key, no scan).
CREATE VIEW outbox_staged AS
SELECT seq, series_id, ts, value FROM readings_stage
WHERE seq > (SELECT staged_acked FROM outbox_stats WHERE id = 1);
