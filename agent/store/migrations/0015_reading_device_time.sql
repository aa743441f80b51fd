-- A reading stamped on receipt (no device time, or one too far off to trust) keeps the device's
-- own time, when it sent one, in device_ts: with the value it identifies a re-delivery of the
-- same message, which is stored once, while its receive stamp is kept unique within the series
-- so that distinct messages received in the same millisecond never collide (docs/design.md, section 6).
ALTER TABLE readings ADD COLUMN device_ts INTEGER;

CREATE INDEX readings_device_ts ON readings (series_id, device_ts) WHERE device_ts IS NOT NULL;
