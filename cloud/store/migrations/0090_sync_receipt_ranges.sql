-- Receipts as ranges (docs/decisions.md, issue 14): one row per run of applied sequence numbers
-- above an agent's contiguous acked_seq instead of one row per applied record, forever.
--
-- A record is applied once: a number at or below agents.acked_seq, or inside one of the agent's
-- receipt ranges (lo, hi], was applied (or refused) before and is skipped. A batch's numbers
-- merge into the ranges; ranges at or below the ack are pruned as it grows. Every batch of an
-- agent holds its agent row's lock, so the ranges of one agent change one batch at a time.

CREATE TABLE sync_receipt_ranges (
    agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    lo bigint NOT NULL CHECK (lo >= 0),
    hi bigint NOT NULL,
    PRIMARY KEY (agent_id, lo),
    CHECK (hi > lo)
);

ALTER TABLE sync_receipt_ranges ENABLE ROW LEVEL SECURITY;
ALTER TABLE sync_receipt_ranges FORCE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE, DELETE ON sync_receipt_ranges TO farm_sync;
CREATE POLICY system_all ON sync_receipt_ranges FOR ALL TO farm_sync USING (true) WITH CHECK (true);

-- The receipts above each agent's ack, as runs of consecutive numbers (those at or below it are
-- covered by the ack itself). The schema owner reads them: it has no policy of its own.
ALTER TABLE sync_receipts NO FORCE ROW LEVEL SECURITY;
ALTER TABLE agents NO FORCE ROW LEVEL SECURITY;
INSERT INTO sync_receipt_ranges (agent_id, lo, hi)
SELECT agent_id, min(seq) - 1, max(seq)
FROM (
    SELECT r.agent_id, r.seq, r.seq - row_number() OVER (PARTITION BY r.agent_id ORDER BY r.seq)
               AS run
    FROM sync_receipts AS r JOIN agents AS a ON a.id = r.agent_id
    WHERE r.seq > a.acked_seq
) AS above
GROUP BY agent_id, run;
ALTER TABLE agents FORCE ROW LEVEL SECURITY;

DROP TABLE sync_receipts;
