-- A batch's live events kept for the other processes (live_feed.body, 0045) as the JSON text the
-- notification would have carried, instead of jsonb (issue 14). The body is written once per
-- batch and read, whole, only by a process with a stream client to tell: PostgreSQL parsing
-- it into jsonb was wasted work, and the largest part of a batch's cost after its readings
-- (a live batch of 3,000 readings carries about 190 kB of events: 9 to 13 ms of PostgreSQL's
-- CPU as jsonb with pglz, 1.7 to 2.1 ms as text with lz4). The cloud now sends the text
-- it has already encoded (before, asyncpg's codec encoded the events a second time).
--
-- lz4 (PostgreSQL 14 and later, when built with it) compresses the text several times faster
-- than the default pglz; a server without it keeps pglz.
ALTER TABLE live_feed ALTER COLUMN body TYPE text USING body::text;
DO $$
BEGIN
    ALTER TABLE live_feed ALTER COLUMN body SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available: live_feed.body keeps the default compression';
END
$$;
