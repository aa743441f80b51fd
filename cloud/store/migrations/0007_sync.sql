-- Sync apply bookkeeping (docs/design.md, section 8), both on the system path only (no farm_app grant).
--
-- sync_coverage: sequence ranges (lo, hi] an agent's committed batches accounted for above its
-- contiguous agents.acked_seq; merged into acked_seq as the gaps fill.
-- sync_batches: ids of batches already applied, so the same signed bytes sent again (a replay)
-- are refused; kept as long as a batch's sent_at may be accepted, then pruned.

CREATE TABLE sync_coverage (
    agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    lo bigint NOT NULL CHECK (lo >= 0),
    hi bigint NOT NULL,
    PRIMARY KEY (agent_id, lo, hi),
    CHECK (hi > lo)
);

CREATE TABLE sync_batches (
    agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    batch_id uuid NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, batch_id)
);
CREATE INDEX sync_batches_received_idx ON sync_batches (received_at);

DO $$
DECLARE
    table_name text;
BEGIN
    FOREACH table_name IN ARRAY ARRAY['sync_coverage', 'sync_batches'] LOOP
        EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', table_name);
        EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', table_name);
        EXECUTE format(
            'GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO farm_sync', table_name
        );
        EXECUTE format(
            'CREATE POLICY system_all ON public.%I FOR ALL TO farm_sync'
            ' USING (true) WITH CHECK (true)',
            table_name
        );
    END LOOP;
END
$$;
