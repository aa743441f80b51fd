-- Irrigation closes promised by POST /api/v1/home-automation/irrigation/control with a duration
-- (issue 11), as the agent keeps them (its migration 0080): written before the hub opens the
-- valve, removed only once the hub took the close. The cloud runs several processes on one
-- database: a due close is claimed with FOR UPDATE SKIP LOCKED and held by a short lease, so one
-- process tries it at a time and another takes over if that one dies. farm_id names the farm
-- whose event log records the close; no foreign key, so deleting the farm never cancels it.
-- Only the system path (farm_sync) touches it: the service authorizes the caller on the farm on
-- the user path first, and shows a caller only the closes of farms they see.
CREATE TABLE hub_irrigation_closes (
    id uuid PRIMARY KEY,
    entity_id text NOT NULL UNIQUE,
    farm_id uuid NOT NULL,
    close_at timestamptz NOT NULL,
    requested_by uuid,
    next_try_at timestamptz NOT NULL,
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error text,
    lease_until timestamptz
);
CREATE INDEX hub_irrigation_closes_next ON hub_irrigation_closes (next_try_at);

ALTER TABLE hub_irrigation_closes ENABLE ROW LEVEL SECURITY;
ALTER TABLE hub_irrigation_closes FORCE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE, DELETE ON hub_irrigation_closes TO farm_sync;
CREATE POLICY system_all ON hub_irrigation_closes FOR ALL TO farm_sync
    USING (true) WITH CHECK (true);
