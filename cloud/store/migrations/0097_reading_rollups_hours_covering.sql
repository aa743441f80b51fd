-- The year read (the read API's automatic resolution over a year of one sensor: 8,760 hourly
-- buckets) from one index range instead of one heap page per bucket.
--
-- `reading_rollups` holds a series' hours among its minutes (sixty times as many), and a live
-- cloud writes every sensor's current hour at once, so a series' hours lie on as many heap pages
-- as it has hours: 8,860 buffers for a year in EXPLAIN, the read's largest cost. This index holds
-- the hours only, in series and time order, with every column the read and its row-level
-- security policy (farm_id) need, so the read is an index-only scan of about 130 pages. Hours
-- closed long ago are all-visible once vacuumed; the open hour is fetched from the heap.
--
-- Built inside the migration's transaction, which blocks writes to the table while it scans it.
-- A large cloud builds it beforehand without blocking (docs/scaling.md):
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS reading_rollups_hours ON reading_rollups ...
-- and this statement then finds it there.
CREATE INDEX IF NOT EXISTS reading_rollups_hours ON reading_rollups (device_id, metric, bucket)
    INCLUDE (farm_id, min, max, total, count)
    WHERE resolution = '1h';
