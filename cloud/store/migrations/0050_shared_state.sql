-- State the cloud's processes share (docs/scaling.md): several farm-cloud processes behind one
-- load balancer count rate limits together and run each periodic job once.

-- Requests per key (a user, an address) in one fixed window. UNLOGGED: a counter is written on
-- every request and is worth nothing after the window, so it skips the WAL; after a PostgreSQL
-- crash the table comes back empty, which only forgives the requests of the current window.
CREATE UNLOGGED TABLE rate_counters (
    key text NOT NULL,
    window_start bigint NOT NULL,
    count integer NOT NULL,
    PRIMARY KEY (key, window_start)
);
ALTER TABLE rate_counters ENABLE ROW LEVEL SECURITY;
ALTER TABLE rate_counters FORCE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE, DELETE ON rate_counters TO farm_sync;
CREATE POLICY system_all ON rate_counters FOR ALL TO farm_sync USING (true) WITH CHECK (true);

-- Periodic jobs: a process runs a job only after moving its next_run_at forward in a
-- conditional UPDATE, so of all the processes that find it due, exactly one runs it.
CREATE TABLE cloud_jobs (
    name text PRIMARY KEY,
    next_run_at timestamptz NOT NULL DEFAULT now(),
    last_started_at timestamptz,
    last_finished_at timestamptz,
    last_error text,
    last_worker text,
    runs bigint NOT NULL DEFAULT 0
);
ALTER TABLE cloud_jobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE cloud_jobs FORCE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE ON cloud_jobs TO farm_sync;
CREATE POLICY system_all ON cloud_jobs FOR ALL TO farm_sync USING (true) WITH CHECK (true);
