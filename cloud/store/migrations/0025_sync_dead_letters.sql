-- Records of agents' batches the cloud refused (docs/design.md, section 8): the rest of a batch
-- commits, the refused record is kept here with its reason for an operator to read, and the
-- agent is told in the acknowledgement. System path only (no farm_app grant), like the other
-- sync bookkeeping of migration 0007.

CREATE TABLE sync_dead_letters (
    id bigserial PRIMARY KEY,
    agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    kind text NOT NULL,
    key text NOT NULL,
    reason text NOT NULL,
    data jsonb NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sync_dead_letters_agent_idx ON sync_dead_letters (agent_id, received_at);

-- Running count per agent, for the operator's figures without a scan.
ALTER TABLE agents ADD COLUMN refused_records bigint NOT NULL DEFAULT 0;

ALTER TABLE sync_dead_letters ENABLE ROW LEVEL SECURITY;
ALTER TABLE sync_dead_letters FORCE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, DELETE ON sync_dead_letters TO farm_sync;
GRANT USAGE ON SEQUENCE sync_dead_letters_id_seq TO farm_sync;
CREATE POLICY system_all ON sync_dead_letters FOR ALL TO farm_sync USING (true) WITH CHECK (true);
