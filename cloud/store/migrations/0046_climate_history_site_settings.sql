-- What the cloud's climate reads and plan progress need from the agent (issue 12):
--
-- - climate_history: the agent's settings changes and its climate loop's actions (with the
--   readings that caused them), fail-safes and manual holds. The loop's state (last action,
--   speed, fail-safe, hold) is read from a settings' newest entries.
-- - agent_settings: settings of an agent's whole site, by key; today the time zone in which
--   plan days are counted.
--
-- A read mirror: users read what RLS lets them (a farm's history with the farm, an agent's
-- settings with any of its farms); only sync apply (farm_sync) writes.

CREATE TABLE climate_history (
    id uuid PRIMARY KEY,
    farm_id uuid NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
    row_id uuid,
    settings_id uuid,
    kind text NOT NULL CHECK (kind IN ('settings', 'action', 'failsafe', 'hold')),
    at timestamptz NOT NULL,
    actor_id uuid,
    actor_email text,
    data jsonb NOT NULL,
    -- Arrival order: the agent's own order among entries of the same instant.
    received bigserial NOT NULL
);
CREATE INDEX climate_history_farm_idx ON climate_history (farm_id, at DESC, received DESC);
CREATE INDEX climate_history_settings_idx ON climate_history (settings_id, at DESC, received DESC);

CREATE TABLE agent_settings (
    agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    key text NOT NULL,
    value text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent_id, key)
);

ALTER TABLE climate_history ENABLE ROW LEVEL SECURITY;
ALTER TABLE climate_history FORCE ROW LEVEL SECURITY;
GRANT SELECT ON climate_history TO farm_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON climate_history TO farm_sync;
GRANT USAGE ON SEQUENCE climate_history_received_seq TO farm_sync;
CREATE POLICY member_select ON climate_history FOR SELECT TO farm_app
    USING ((SELECT authz.is_admin())
           OR farm_id = ANY ((SELECT authz.readable_farm_ids())::uuid[]));
CREATE POLICY system_all ON climate_history FOR ALL TO farm_sync USING (true) WITH CHECK (true);

ALTER TABLE agent_settings ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_settings FORCE ROW LEVEL SECURITY;
GRANT SELECT ON agent_settings TO farm_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON agent_settings TO farm_sync;
-- farms is itself under RLS here: an agent's settings show with any farm the user may see.
CREATE POLICY member_select ON agent_settings FOR SELECT TO farm_app
    USING (agent_id IN (SELECT f.agent_id FROM farms AS f));
CREATE POLICY system_all ON agent_settings FOR ALL TO farm_sync USING (true) WITH CHECK (true);
