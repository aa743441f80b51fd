-- Open WebSocket stream connections of every cloud process, so that the per-user limit
-- (CLOUD_WS_MAX_CONNECTIONS_PER_USER) holds across processes. A process refreshes seen_at of
-- its rows while it runs; rows of a process that died unannounced (kill -9) stop counting once
-- their seen_at is older than the process's time to live, and are swept.
CREATE UNLOGGED TABLE stream_connections (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL,
    worker text NOT NULL,
    opened_at timestamptz NOT NULL DEFAULT now(),
    seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stream_connections_user_idx ON stream_connections (user_id, seen_at);
CREATE INDEX stream_connections_worker_idx ON stream_connections (worker);
ALTER TABLE stream_connections ENABLE ROW LEVEL SECURITY;
ALTER TABLE stream_connections FORCE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE, DELETE ON stream_connections TO farm_sync;
CREATE POLICY system_all ON stream_connections FOR ALL TO farm_sync
    USING (true) WITH CHECK (true);
