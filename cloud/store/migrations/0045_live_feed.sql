-- The live streams' feed between cloud processes (docs/design.md, section 7). Sync apply announces
-- what a batch changed with NOTIFY on the channel farm_live, in the batch's own transaction, so
-- a stream client on any process hears of it only once the batch has committed. A NOTIFY payload
-- holds at most 8000 bytes: a batch's events that do not fit are kept here and the notification
-- names the row. Every batch that announces something leaves a row (its events counted by
-- stream), so a
-- process whose listening connection was lost can tell its clients exactly how many events they
-- missed. Rows are short-lived: apply prunes those older than an hour. System path only.

CREATE TABLE live_feed (
    id bigserial PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    counts jsonb NOT NULL,
    body jsonb
);
CREATE INDEX live_feed_created_idx ON live_feed (created_at);

ALTER TABLE live_feed ENABLE ROW LEVEL SECURITY;
ALTER TABLE live_feed FORCE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, DELETE ON live_feed TO farm_sync;
GRANT USAGE ON SEQUENCE live_feed_id_seq TO farm_sync;
CREATE POLICY system_all ON live_feed FOR ALL TO farm_sync USING (true) WITH CHECK (true);
