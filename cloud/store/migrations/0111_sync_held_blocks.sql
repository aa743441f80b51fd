-- Readings an agent sent for a device the mirror does not hold yet (issue 30). A batch refused
-- as a whole (a 409 for a clock far off, a 503) could reach the cloud again without the device
-- record its readings name; such readings are held here, not dead-lettered, and applied in the
-- transaction that brings their device from the same agent. A device on another agent's farm
-- is still refused: its readings go to sync_dead_letters.
-- kind and data are those of the record ('readings': a delta-encoded block; 'readings_1m',
-- 'readings_1h': one rollup each, so that only the rollups the cloud never applied are held).
CREATE TABLE sync_held_blocks (
    id bigserial PRIMARY KEY,
    agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    device_id uuid NOT NULL,
    seq bigint NOT NULL,
    kind text NOT NULL,
    key text NOT NULL,
    data jsonb NOT NULL,
    held_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sync_held_blocks_device_idx ON sync_held_blocks (agent_id, device_id);

ALTER TABLE sync_held_blocks ENABLE ROW LEVEL SECURITY;
ALTER TABLE sync_held_blocks FORCE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, DELETE ON sync_held_blocks TO farm_sync;
GRANT USAGE ON SEQUENCE sync_held_blocks_id_seq TO farm_sync;
CREATE POLICY system_all ON sync_held_blocks FOR ALL TO farm_sync USING (true) WITH CHECK (true);
